//! Packing a backup's sources without a catalog: the walk and the reading of
//! files ([`source`]), the comparison with a base ([`scan`]), the packer of each
//! stream ([`packer`]) and its channel to whatever takes its blocks ([`mux`]),
//! software compression ([`compress`]), generated sources ([`generator`],
//! [`generated`]), and the packing side of a job written on another machine
//! ([`remote`]). The engine's writer, or a client's sender, takes the blocks.

pub mod compress;
pub mod generated;
pub mod generator;
pub mod mux;
pub mod only;
pub mod packer;
pub mod plan;
pub mod remote;
pub mod scan;
pub mod source;

pub use compress::Compress;
pub use only::Only;
pub use plan::PackOptions;
pub use remote::{pack_streams, Outgoing, Piece, RemotePlan, RemoteStream};
pub use scan::{Scan, ScanFigures};
