//! The command line's integration tests, in one test binary (one link instead of
//! one per file): each file of `tests/it/` is a module, and a test is named
//! `module::test`, for example `cargo test --release -p tapeloom --test it
//! net_queue::`. Helpers shared by the modules are in `common/`; the data they
//! read (`tests/golden`, `tests/json-keys`, `tests/numeric-options.txt`) stays
//! beside `it/`.

mod common;

mod cartridge_index;
mod catalog_check;
mod catalog_pg;
mod completions;
mod copies;
mod doc_names;
mod encrypt;
mod expire;
mod faults;
mod full_home;
mod generated;
mod golden;
mod hsm;
mod incremental;
mod injected_faults;
mod json_keys;
mod metrics;
mod model;
mod moves;
mod multiplex;
mod names;
mod net_backup;
mod net_encrypted;
mod net_frames;
mod net_incremental;
mod net_keepalive;
mod net_queue;
mod net_rebuild;
mod net_restore;
mod net_server_keys;
mod net_set_restore;
mod net_verify;
mod nginx;
mod offsite;
mod options;
mod overwrite;
mod pipe;
mod plan;
mod point_in_time;
mod pool_rules;
mod pools;
mod read_only_home;
mod readback;
mod rebuild_sets;
mod rebuild_streams;
mod recover;
mod report;
mod restore_whole;
mod roundtrip;
mod s3;
mod salvage;
mod schedule;
mod scsi;
mod server;
mod server_drives;
mod server_kill;
mod server_limits;
mod server_resume;
mod server_stop;
mod site;
mod stage;
mod status_page;
mod tape_alerts;
