//! Source trees for the tests and how two trees are compared: every object's
//! names, content and metadata.

use super::is_root;
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Deterministic pseudo-random bytes (xorshift), fast enough for hundreds of MB.
pub fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut v = Vec::with_capacity(len + 8);
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(len);
    v
}

pub fn write(path: &Path, data: &[u8]) {
    if let Some(p) = path.parent() {
        std::fs::create_dir_all(p).unwrap();
    }
    std::fs::write(path, data).unwrap();
}

/// Sets a file's times with nanoseconds, without following symlinks.
pub fn set_times(path: &Path, secs: i64, nanos: i64) {
    let t = nix::sys::time::TimeSpec::new(secs, nanos);
    nix::sys::stat::utimensat(
        None,
        path,
        &t,
        &t,
        nix::sys::stat::UtimensatFlags::NoFollowSymlink,
    )
    .unwrap();
}

/// A tree with every kind of object tapeloom promises to restore.
pub fn rich_tree(root: &Path) {
    std::fs::create_dir_all(root.join("dir/sub")).unwrap();
    std::fs::create_dir_all(root.join("empty")).unwrap();
    write(&root.join("dir/plain.txt"), b"hello tape\n");
    write(&root.join("dir/sub/big.bin"), &noise(1, 3_000_000));
    write(&root.join("with space"), b"space");
    write(&root.join("new\nline"), b"newline");
    write(&root.join("-leading-dash"), b"dash");
    write(
        &root.join(OsStr::from_bytes(b"latin1-\xe9t\xe9")),
        b"not utf-8",
    );
    write(&root.join("zero"), b"");
    std::os::unix::fs::symlink("plain.txt", root.join("dir/link")).unwrap();
    std::os::unix::fs::symlink("/nonexistent/target", root.join("dangling")).unwrap();
    std::fs::hard_link(root.join("dir/plain.txt"), root.join("hardlink")).unwrap();
    nix::unistd::mkfifo(
        &root.join("fifo"),
        nix::sys::stat::Mode::from_bits_truncate(0o640),
    )
    .unwrap();
    // A sparse file: 16 MiB with two small data islands.
    let f = std::fs::File::create(root.join("sparse")).unwrap();
    f.set_len(16 << 20).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, b"island one", 4096 * 10).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, &noise(3, 70_000), 8 << 20).unwrap();
    drop(f);
    xattr::set(root.join("dir/plain.txt"), "user.tapeloom", b"xattr value").unwrap();
    std::fs::set_permissions(
        root.join("dir/sub"),
        std::fs::Permissions::from_mode(0o2750),
    )
    .unwrap();
    std::fs::set_permissions(
        root.join("with space"),
        std::fs::Permissions::from_mode(0o4711),
    )
    .unwrap();
    if is_root() {
        nix::sys::stat::mknod(
            &root.join("null-dev"),
            nix::sys::stat::SFlag::S_IFCHR,
            nix::sys::stat::Mode::from_bits_truncate(0o666),
            nix::sys::stat::makedev(1, 3),
        )
        .unwrap();
        std::os::unix::fs::lchown(root.join("dir/plain.txt"), Some(4321), Some(8765)).unwrap();
        std::os::unix::fs::lchown(root.join("dangling"), Some(1), Some(2)).unwrap();
    }
    set_times(&root.join("dir/plain.txt"), 1_000_000_000, 123_456_789);
    set_times(&root.join("dangling"), 1_100_000_000, 987_654_321);
    set_times(&root.join("dir/sub"), 1_200_000_000, 5);
    set_times(&root.join("empty"), 1_300_000_000, 6);
}

/// `dirs` folders of `per` files each, file `i` of folder `d` at `name(d, i)`,
/// of noise seeded `d * per + i` and 1 to `max_len` bytes.
pub fn numbered_files(
    src: &Path,
    (dirs, per): (usize, usize),
    max_len: usize,
    name: impl Fn(usize, usize) -> String,
) {
    for d in 0..dirs {
        for i in 0..per {
            let len = 1 + (d * 7919 + i * 104_729) % max_len;
            write(&src.join(name(d, i)), &noise((d * per + i) as u64, len));
        }
    }
}

/// [`rich_tree`] with files of several sizes besides (`sizes/f0` to `f4`: 1 byte
/// to 1 MiB).
pub fn source_tree(src: &Path) {
    rich_tree(src);
    for (i, len) in [1usize, 4095, 65_536, 300_001, 1 << 20]
        .into_iter()
        .enumerate()
    {
        write(&src.join(format!("sizes/f{i}")), &noise(10 + i as u64, len));
    }
}

/// Everything compared about one object.
#[derive(Debug, PartialEq, Eq)]
pub struct Meta {
    pub kind: &'static str,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub mtime: (i64, i64),
    pub size: u64,
    pub content: Option<u64>,
    pub sparse: bool,
    pub link: Option<Vec<u8>>,
    pub rdev: u64,
    pub xattrs: Vec<(Vec<u8>, Vec<u8>)>,
    pub nlink: u64,
}

fn hash(data: &[u8]) -> u64 {
    crc32c::crc32c(data) as u64 | ((data.len() as u64) << 32)
}

pub fn meta(p: &Path, with_dir_mtime: bool) -> Meta {
    let m = std::fs::symlink_metadata(p).unwrap();
    let ft = m.file_type();
    let kind = if ft.is_file() {
        "file"
    } else if ft.is_dir() {
        "dir"
    } else if ft.is_symlink() {
        "symlink"
    } else if ft.is_fifo() {
        "fifo"
    } else if ft.is_char_device() {
        "chardev"
    } else if ft.is_block_device() {
        "blockdev"
    } else {
        "other"
    };
    let mut xattrs: Vec<(Vec<u8>, Vec<u8>)> = xattr::list(p)
        .map(|l| {
            l.filter_map(|n| {
                xattr::get(p, &n)
                    .ok()
                    .flatten()
                    .map(|v| (n.as_bytes().to_vec(), v))
            })
            .collect()
        })
        .unwrap_or_default();
    xattrs.sort();
    Meta {
        kind,
        mode: m.mode(),
        uid: m.uid(),
        gid: m.gid(),
        mtime: if ft.is_dir() && !with_dir_mtime {
            (0, 0)
        } else {
            (m.mtime(), m.mtime_nsec())
        },
        size: if ft.is_file() { m.size() } else { 0 },
        content: ft.is_file().then(|| hash(&std::fs::read(p).unwrap())),
        sparse: ft.is_file() && m.blocks() * 512 < m.size(),
        link: ft.is_symlink().then(|| {
            std::fs::read_link(p)
                .unwrap()
                .as_os_str()
                .as_bytes()
                .to_vec()
        }),
        rdev: if ft.is_char_device() || ft.is_block_device() {
            m.rdev()
        } else {
            0
        },
        xattrs,
        nlink: if ft.is_dir() { 0 } else { m.nlink() },
    }
}

/// Every object below `root` (and `root` itself as ""), by relative path.
pub fn tree(root: &Path) -> BTreeMap<Vec<u8>, PathBuf> {
    let mut out = BTreeMap::new();
    out.insert(Vec::new(), root.to_path_buf());
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let rel = p
                .strip_prefix(root)
                .unwrap()
                .as_os_str()
                .as_bytes()
                .to_vec();
            if e.file_type().unwrap().is_dir() {
                stack.push(p.clone());
            }
            out.insert(rel, p);
        }
    }
    out
}

/// Asserts two trees are equal in names, content and metadata. `root_mtime` says
/// whether the roots' own mtimes must match too.
pub fn assert_same_tree(a: &Path, b: &Path) {
    let ta = tree(a);
    let tb = tree(b);
    let na: Vec<_> = ta.keys().collect();
    let nb: Vec<_> = tb.keys().collect();
    assert_eq!(na, nb, "the trees hold different names");
    for (rel, pa) in &ta {
        let pb = &tb[rel];
        let ma = meta(pa, true);
        let mb = meta(pb, true);
        assert_eq!(ma, mb, "{:?} differs", String::from_utf8_lossy(rel));
    }
}

/// The inode of a path (for hard-link checks).
pub fn ino(p: &Path) -> u64 {
    std::fs::symlink_metadata(p).unwrap().ino()
}

/// Whether `p` is not there or an empty folder: nothing was placed.
pub fn is_empty_or_absent(p: &Path) -> bool {
    !p.exists() || std::fs::read_dir(p).unwrap().next().is_none()
}

/// Copies a folder and all it holds (`cp -a`: metadata, xattrs and hard links
/// kept), for a fresh copy of a home per case or a snapshot of a source.
pub fn copy_tree(from: &Path, to: &Path) {
    let s = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(s.success(), "cp -a {} {}", from.display(), to.display());
}
