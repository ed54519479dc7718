//! The tapeloom home: catalog, library and lock in one folder.

use crate::error::{io, Error, HomeError, Result};
use std::fs::File;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use tapeloom_catalog::Catalog;
pub use tapeloom_device::scsi::ScsiLibraryConfig;
use tapeloom_device::{LibraryConfig, TapeLibrary, VirtualLibrary};

/// An open library of the home: the virtual one, or real devices attached to it.
pub type Library = Box<dyn TapeLibrary>;

/// Drives of the library made on first use.
pub const DEFAULT_DRIVES: usize = 2;
/// Slots of the library made on first use.
pub const DEFAULT_SLOTS: usize = 16;
/// Logical capacity of each cartridge of the library made on first use (1 TiB).
pub const DEFAULT_CAPACITY: u64 = 1 << 40;

/// The home to use when none is given: `$TAPELOOM_HOME`, else the XDG data folder.
pub fn default_home() -> PathBuf {
    if let Some(h) = std::env::var_os("TAPELOOM_HOME").filter(|h| !h.is_empty()) {
        return PathBuf::from(h);
    }
    if let Some(x) = std::env::var_os("XDG_DATA_HOME").filter(|h| !h.is_empty()) {
        return PathBuf::from(x).join("tapeloom");
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
    PathBuf::from(home).join(".local/share/tapeloom")
}

/// The catalog's file in the home.
const CATALOG_FILE: &str = "catalog.sqlite";

/// The home's configuration: where its catalog is (`catalog = "postgresql://..."`).
const HOME_CONFIG: &str = "home.toml";

/// The catalog URL given on the command line (`--catalog`), for every home the
/// process opens.
static CATALOG_URL: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Names the catalog every home of this process uses, over its `home.toml`
/// (`--catalog URL`). Refused when the URL holds a password: a password on a
/// command line is seen by every user of the machine.
pub fn use_catalog(url: &str) -> Result<()> {
    refuse_password(url)?;
    let _ = CATALOG_URL.set(url.to_string());
    Ok(())
}

/// Refuses a catalog URL given on the command line that holds a password.
pub fn refuse_password(url: &str) -> Result<()> {
    if url_has_password(url) {
        return Err(HomeError::PasswordOnCommandLine.into());
    }
    Ok(())
}

/// Whether `url` (`postgresql://USER:PASSWORD@HOST/...`, or `key=value` pairs)
/// holds a password.
fn url_has_password(url: &str) -> bool {
    match url.split_once("://") {
        Some((_, rest)) => {
            rest.split_once('@')
                .is_some_and(|(user, _)| user.contains(':'))
                || rest.contains("password=")
        }
        None => url.split_whitespace().any(|kv| kv.starts_with("password=")),
    }
}

/// What `home.toml` may say.
#[derive(serde::Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct HomeConfig {
    /// The PostgreSQL catalog's URL; the SQLite file in the home when absent.
    catalog: Option<String>,
    /// The home's name among the servers that share a catalog; the machine's
    /// host name when absent.
    name: Option<String>,
}

/// The home's `home.toml`, or the defaults when it has none.
fn home_config(dir: &Path) -> Result<HomeConfig> {
    let path = dir.join(HOME_CONFIG);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(HomeConfig::default()),
        Err(e) => {
            let why = e.to_string();
            return Err(HomeError::BadConfig { path, why }.into());
        }
    };
    toml::from_str(&text).map_err(|e| {
        HomeError::BadConfig {
            path: path.clone(),
            why: e.message().to_string(),
        }
        .into()
    })
}

/// The PostgreSQL catalog the home at `dir` uses, if it uses one: `--catalog`,
/// else its `home.toml`.
pub fn catalog_url(dir: &Path) -> Result<Option<String>> {
    if let Some(u) = CATALOG_URL.get() {
        return Ok(Some(u.clone()));
    }
    Ok(home_config(dir)?.catalog)
}

/// The name of the home at `dir` among the servers of a site: `name` in its
/// `home.toml`, else the machine's host name. Its jobs and stages in a shared
/// catalog are marked with it.
pub fn home_name(dir: &Path) -> Result<String> {
    if let Some(n) = home_config(dir)?.name.filter(|n| !n.trim().is_empty()) {
        return Ok(n);
    }
    Ok(nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into()))
}

/// Opens the catalog of the home at `dir`: its PostgreSQL catalog when it names
/// one, else its SQLite file.
/// A PostgreSQL catalog works for the home's name ([`home_name`]), for it may
/// be shared with other homes.
fn open_catalog(dir: &Path) -> Result<Catalog> {
    match catalog_url(dir)? {
        Some(url) => {
            let mut c = Catalog::connect(&url)?;
            c.set_host(&home_name(dir)?);
            Ok(c)
        }
        None => Ok(Catalog::open(&dir.join(CATALOG_FILE))?),
    }
}

/// The catalog of the home at `dir` on a read-only file system: its SQLite file
/// read as it is; a catalog it names elsewhere (PostgreSQL) as usual.
fn open_catalog_to_read(dir: &Path) -> Result<Catalog> {
    match catalog_url(dir)? {
        Some(_) => open_catalog(dir),
        None => Ok(Catalog::open_read_only(&dir.join(CATALOG_FILE))?),
    }
}

/// The test hook `TAPELOOM_TEST_PG_URL` (a build with the feature `test-hooks`
/// only): a new home gets a catalog of its own, a database made for it on that
/// PostgreSQL server and named in its `home.toml`, instead of a SQLite file, so
/// that the end-to-end tests run on PostgreSQL as they do on SQLite. A home that
/// has either already is left as it is.
#[cfg(feature = "test-hooks")]
fn test_catalog(dir: &Path) -> Result<()> {
    use std::hash::{Hash, Hasher};
    let Ok(server) = std::env::var("TAPELOOM_TEST_PG_URL") else {
        return Ok(());
    };
    if dir.join(HOME_CONFIG).exists() || dir.join(CATALOG_FILE).exists() {
        return Ok(());
    }
    let abs = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    let mut h = std::collections::hash_map::DefaultHasher::new();
    abs.hash(&mut h);
    let name = format!("tl_{:016x}", h.finish());
    let url = Catalog::create_database(&server, &name)?;
    let text = format!("catalog = {:?}\n", url);
    io(
        tapeloom_device::fsio::write_atomic(&dir.join(HOME_CONFIG), text.as_bytes()),
        || format!("write {}", dir.join(HOME_CONFIG).display()),
    )
}

/// The SQLite catalog file of the home at `dir` (used when it names no other).
pub fn catalog_file(dir: &Path) -> PathBuf {
    dir.join(CATALOG_FILE)
}

/// The file naming the SCSI devices attached to the home.
const DEVICES_FILE: &str = "devices.json";

/// The faults the test hook `TAPELOOM_FAULTS` asks for (a build with the feature
/// `test-hooks` only). Parsed once per process and shared by every library
/// opened, so a fault that fires once fires once in the process.
#[cfg(feature = "test-hooks")]
fn injected_faults() -> Result<Option<tapeloom_device::faults::Faults>> {
    use std::sync::OnceLock;
    use tapeloom_device::faults::{FaultPlan, FaultSpecError, Faults};
    static FAULTS: OnceLock<std::result::Result<Option<Faults>, FaultSpecError>> = OnceLock::new();
    FAULTS
        .get_or_init(|| match std::env::var("TAPELOOM_FAULTS") {
            Ok(spec) if !spec.trim().is_empty() => {
                FaultPlan::parse(&spec).map(|p| Some(Faults::new(p)))
            }
            _ => Ok(None),
        })
        .clone()
        .map_err(|source| HomeError::FaultSpec { source }.into())
}

/// An open home. Holding it holds the home's lock: one process changes a home at a time.
///
/// A process that runs several jobs at once (the server, one job per free drive)
/// gives each job a [`Home::sibling`]: the same lock, a catalog connection of its
/// own, and one library handle shared by all of them.
pub struct Home {
    dir: PathBuf,
    /// The home's lock; none on a home opened to read ([`Home::open_to_read`]).
    _lock: Option<std::sync::Arc<nix::fcntl::Flock<File>>>,
    /// The one library handle of the home and its siblings, once one was made.
    shared: Option<crate::media::shared::SharedLibrary>,
    /// The catalog.
    pub catalog: Catalog,
    /// Master keys given for reading encrypted jobs (`--key`).
    pub keys: Vec<tapeloom_format::MasterKey>,
}

impl Home {
    /// Opens `dir`, creating it with a catalog and the default library on first use,
    /// and takes its lock (waiting for another tapeloom process to finish).
    pub fn open(dir: &Path) -> Result<Self> {
        io(std::fs::create_dir_all(dir), || {
            format!("create home {}", dir.display())
        })?;
        let lock_path = dir.join("lock");
        let opened = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path);
        if matches!(&opened, Err(e) if e.raw_os_error() == Some(nix::libc::EROFS)) {
            return Err(HomeError::ReadOnly {
                dir: dir.to_path_buf(),
            }
            .into());
        }
        let f = io(opened, || format!("open {}", lock_path.display()))?;
        let _ = f.as_fd();
        let lock = nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusive).map_err(
            |(_, errno)| HomeError::Locked {
                path: lock_path.clone(),
                source: errno.into(),
            },
        )?;
        #[cfg(feature = "test-hooks")]
        test_catalog(dir)?;
        let catalog = open_catalog(dir)?;
        catalog.recover_interrupted()?;
        let home = Home {
            dir: dir.to_path_buf(),
            _lock: Some(std::sync::Arc::new(lock)),
            shared: None,
            catalog,
            keys: Vec::new(),
        };
        if !VirtualLibrary::exists(&home.library_dir()) {
            VirtualLibrary::create(
                &home.library_dir(),
                LibraryConfig {
                    drives: DEFAULT_DRIVES,
                    slots: DEFAULT_SLOTS,
                    capacity: DEFAULT_CAPACITY,
                    model: None,
                    clock: None,
                    scale: None,
                    cleaning: 0,
                    prefix: None,
                    mail_slots: 0,
                    headers_only: false,
                },
            )?;
        }
        Ok(home)
    }

    /// Opens `dir` as [`Home::open`] does; on a read-only file system (a
    /// snapshot of a home, a disaster-recovery copy), opens it to read only: no
    /// lock (nothing can change it), its SQLite catalog read as it is
    /// ([`Catalog::open_read_only`]), and its virtual library's moves kept in
    /// memory. Commands that only read (`jobs`, `ls`, `restore`, `verify`,
    /// `library status`) open their home this way; a write then fails.
    pub fn open_to_read(dir: &Path) -> Result<Self> {
        match Self::open(dir) {
            Err(Error::Home(HomeError::ReadOnly { .. })) => {}
            other => return other,
        }
        let catalog = open_catalog_to_read(dir)?;
        Ok(Home {
            dir: dir.to_path_buf(),
            _lock: None,
            shared: None,
            catalog,
            keys: Vec::new(),
        })
    }

    /// Whether this home was opened to read only ([`Home::open_to_read`]).
    pub fn is_read_only(&self) -> bool {
        self._lock.is_none()
    }

    /// Opens the catalog of the home at `dir` without taking the home's lock, for a
    /// process that reads it while others change the home (the server): WAL lets
    /// readers run beside a writer. Interrupted jobs are not recovered (a job
    /// running in another process is not interrupted); the home must have been
    /// opened once with [`Home::open`].
    pub fn open_catalog_unlocked(dir: &Path) -> Result<Catalog> {
        open_catalog(dir)
    }

    /// Another handle on this home for a job that runs beside this one's in the
    /// same process: the same lock (held until the last handle goes), a catalog
    /// connection of its own, and the library shared with this handle (made
    /// shared here on first use). Interrupted jobs are not looked for again.
    pub fn sibling(&mut self) -> Result<Home> {
        if self.shared.is_none() {
            let lib = self.open_library()?;
            self.shared = Some(crate::media::shared::SharedLibrary::new(lib));
        }
        Ok(Home {
            dir: self.dir.clone(),
            _lock: self._lock.clone(),
            shared: self.shared.clone(),
            catalog: self.connect()?,
            keys: self.keys.clone(),
        })
    }

    /// Another connection to the catalog, for a thread of its own.
    pub fn connect(&self) -> Result<Catalog> {
        match self.is_read_only() {
            true => open_catalog_to_read(&self.dir),
            false => open_catalog(&self.dir),
        }
    }

    /// The home folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Folder of the virtual library.
    pub fn library_dir(&self) -> PathBuf {
        self.dir.join("library")
    }

    /// Opens the home's library: the SCSI devices attached to it, else the virtual
    /// library. In a build with the feature `test-hooks`, wrapped in the faults
    /// `TAPELOOM_FAULTS` asks for, when it holds a spec (`docs/FAULTS.md`).
    pub fn library(&self) -> Result<Library> {
        match &self.shared {
            Some(lib) => Ok(Box::new(lib.clone())),
            None => self.open_library(),
        }
    }

    /// Opens the library anew (see [`Home::library`]).
    fn open_library(&self) -> Result<Library> {
        #[cfg(feature = "test-hooks")]
        let faults = injected_faults()?;
        let lib: Library = match self.attached()? {
            Some(cfg) => Box::new(tapeloom_device::scsi::ScsiLibrary::open(&cfg)?),
            None => Box::new(self.virtual_library()?),
        };
        #[cfg(feature = "test-hooks")]
        if let Some(f) = faults {
            return Ok(Box::new(f.wrap(lib)));
        }
        Ok(lib)
    }

    /// Opens the virtual library.
    pub fn virtual_library(&self) -> Result<VirtualLibrary> {
        Ok(VirtualLibrary::open(&self.library_dir())?)
    }

    /// The file recording the devices attached to the home.
    pub fn devices_file(&self) -> PathBuf {
        self.dir.join(DEVICES_FILE)
    }

    /// The SCSI library attached to the home, if one is.
    pub fn attached(&self) -> Result<Option<ScsiLibraryConfig>> {
        let p = self.devices_file();
        let text = match std::fs::read_to_string(&p) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(Error::Io {
                    what: format!("read {}", p.display()),
                    source,
                })
            }
        };
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|source| Error::Json {
                what: format!("{} is damaged", p.display()),
                source,
            })
    }

    /// Refuses when the catalog knows volumes with jobs on them (unless `force`).
    fn check_no_jobs(&self, what: &'static str, force: bool) -> Result<()> {
        if force {
            return Ok(());
        }
        let own = self.site_barcodes();
        for v in self.catalog.volumes()? {
            if own.as_ref().is_some_and(|b| !b.contains(&v.barcode)) {
                // Another server's cartridge, in its own library.
                continue;
            }
            if self.catalog.jobs_on_volume(v.id)? > 0 {
                return Err(HomeError::HoldsJobs {
                    barcode: v.barcode,
                    what,
                }
                .into());
            }
        }
        Ok(())
    }

    /// On a catalog several homes share (one that works for a host), the
    /// barcodes of this home's library: the volumes it may forget or replace
    /// are among them. None on a home's own catalog, where every volume is its.
    pub fn site_barcodes(&self) -> Option<Vec<String>> {
        if self.catalog.host().is_empty() {
            return None;
        }
        let barcodes = (self.library().ok())
            .and_then(|mut l| l.inventory().ok())
            .map(|i| i.barcodes())
            .unwrap_or_default();
        Some(barcodes)
    }

    /// Attaches a library of SCSI devices to the home, in place of the current
    /// library. Refused while the current library holds jobs, unless `force`.
    pub fn attach(&self, cfg: &ScsiLibraryConfig, force: bool) -> Result<()> {
        self.check_no_jobs("attach another library", force)?;
        let p = self.devices_file();
        let text = serde_json::to_string_pretty(cfg).map_err(|source| Error::Json {
            what: format!("encode {}", p.display()),
            source,
        })?;
        io(
            tapeloom_device::fsio::write_atomic(&p, text.as_bytes()),
            || format!("write {}", p.display()),
        )
    }

    /// Goes back to the virtual library. Refused while the SCSI library holds jobs,
    /// unless `force`.
    pub fn detach(&self, force: bool) -> Result<()> {
        if self.attached()?.is_none() {
            return Ok(());
        }
        self.check_no_jobs("detach the library", force)?;
        io(std::fs::remove_file(self.devices_file()), || {
            format!("remove {}", self.devices_file().display())
        })?;
        self.catalog.forget_unused_volumes()?;
        Ok(())
    }

    /// Replaces the library with a new layout. Refused when the catalog knows
    /// volumes with jobs on them, or when a cartridge holds data.
    pub fn create_library(&self, config: LibraryConfig) -> Result<VirtualLibrary> {
        self.check_no_jobs("replace it", false)?;
        let lib = VirtualLibrary::create(&self.library_dir(), config)?;
        match std::fs::remove_file(self.devices_file()) {
            Err(source) if source.kind() != std::io::ErrorKind::NotFound => {
                return Err(Error::Io {
                    what: format!("detach {}", self.devices_file().display()),
                    source,
                })
            }
            _ => {}
        }
        Ok(lib)
    }
}
