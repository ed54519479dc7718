//! A stream's blocks between its client and the drive. While the stream's job is on
//! a drive and the drive keeps up, they wait in memory; otherwise (the job waits
//! for a drive, or its client sends faster than the drive takes) in a file of the
//! server's spool folder, which is emptied each time the drive catches up. All
//! streams together hold at most the spool's size; a client whose next block would
//! pass it waits (its connection stalls) until the drives take blocks.

use super::queue::Counters;
use std::collections::VecDeque;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// Bytes a stream keeps in memory while its job is on a drive.
const MEM_CAP: u64 = 32 << 20;

/// What a client sends of a stream.
#[derive(Debug, PartialEq, Eq)]
pub enum Item {
    /// A block, as sent.
    Block(Vec<u8>),
    /// A source object the client could not back up: its path, and why.
    Note(Vec<u8>, String),
    /// The stream's end.
    End,
    /// A sign of life of a client with nothing to send: never kept, only told to
    /// the drive's side when nothing else waits for it.
    Alive,
}

impl Item {
    /// Bytes it holds.
    fn len(&self) -> u64 {
        match self {
            Item::Block(b) => b.len() as u64,
            Item::Note(p, w) => (p.len() + w.len()) as u64,
            Item::End | Item::Alive => 0,
        }
    }
}

/// The space of the spool, shared by every stream.
pub struct Budget {
    used: Mutex<u64>,
    freed: Condvar,
    max: u64,
    waiting: AtomicUsize,
}

impl Budget {
    /// A spool of `max` bytes.
    pub fn new(max: u64) -> Self {
        Budget {
            used: Mutex::new(0),
            freed: Condvar::new(),
            max,
            waiting: AtomicUsize::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, u64> {
        self.used.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes `n` bytes, waiting while they would pass the size (an empty spool
    /// takes any one item); false when `stop` says to give up.
    fn take(&self, n: u64, stop: impl Fn() -> bool) -> bool {
        let mut used = self.lock();
        if *used > 0 && *used + n > self.max {
            self.waiting.fetch_add(1, Ordering::AcqRel);
            while *used > 0 && *used + n > self.max {
                if stop() {
                    self.waiting.fetch_sub(1, Ordering::AcqRel);
                    return false;
                }
                used = (self.freed)
                    .wait_timeout(used, Duration::from_millis(200))
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
            self.waiting.fetch_sub(1, Ordering::AcqRel);
        }
        *used += n;
        true
    }

    /// Gives `n` bytes back.
    fn give(&self, n: u64) {
        let mut used = self.lock();
        *used = used.saturating_sub(n);
        self.freed.notify_all();
    }

    /// Bytes held.
    pub fn used(&self) -> u64 {
        *self.lock()
    }

    /// The size.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// Whether a client waits for space.
    pub fn pressed(&self) -> bool {
        self.waiting.load(Ordering::Acquire) > 0
    }
}

/// Why a stream's spool takes or gives nothing more: its job failed or stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Closed(pub String);

#[derive(Default)]
struct State {
    mem: VecDeque<Item>,
    mem_bytes: u64,
    file: Option<File>,
    write_off: u64,
    read_off: u64,
    /// Items in the file not yet taken (all newer than those in memory).
    in_file: u64,
    /// The job is on a drive: blocks may wait in memory.
    attached: bool,
    /// A sign of life came since the last item was taken.
    alive: bool,
    closed: Option<String>,
}

/// One stream's spool.
pub struct StreamSpool {
    path: PathBuf,
    state: Mutex<State>,
    changed: Condvar,
    budget: Arc<Budget>,
    counters: Arc<Counters>,
}

/// An item's header in the file: kind, then the two lengths.
const ITEM_HEAD: usize = 9;

impl StreamSpool {
    /// The spool of a stream, its file at `path` (made when first needed).
    pub fn new(path: PathBuf, budget: Arc<Budget>, counters: Arc<Counters>) -> Self {
        StreamSpool {
            path,
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            budget,
            counters,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps `item`, waiting for space in the spool. [`Item::Alive`] takes no
    /// space and is not kept: [`StreamSpool::pop`] says it once nothing else waits.
    pub fn push(&self, item: Item) -> Result<(), Closed> {
        if item == Item::Alive {
            return self.alive();
        }
        let n = item.len();
        let closed = || self.lock().closed.is_some();
        if !self.budget.take(n, closed) {
            return Err(self.closed_reason());
        }
        let mut s = self.lock();
        if let Some(why) = &s.closed {
            let why = why.clone();
            drop(s);
            self.budget.give(n);
            return Err(Closed(why));
        }
        self.counters.received(n, matches!(item, Item::Block(_)));
        if s.attached && s.in_file == 0 && s.mem_bytes + n <= MEM_CAP {
            s.mem_bytes += n;
            s.mem.push_back(item);
        } else if let Err(e) = self.append(&mut s, &item) {
            let why = format!("keep a block on the spool {}: {e}", self.path.display());
            s.closed = Some(why.clone());
            drop(s);
            self.budget.give(n);
            self.changed.notify_all();
            return Err(Closed(why));
        }
        drop(s);
        self.changed.notify_all();
        Ok(())
    }

    /// Notes a sign of life of the client.
    fn alive(&self) -> Result<(), Closed> {
        let mut s = self.lock();
        if let Some(why) = &s.closed {
            return Err(Closed(why.clone()));
        }
        s.alive = true;
        drop(s);
        self.changed.notify_all();
        Ok(())
    }

    fn closed_reason(&self) -> Closed {
        Closed(self.lock().closed.clone().unwrap_or_default())
    }

    /// Writes `item` at the end of the file.
    fn append(&self, s: &mut State, item: &Item) -> std::io::Result<()> {
        if s.file.is_none() {
            s.file = Some(
                std::fs::OpenOptions::new()
                    .create(true)
                    .truncate(true)
                    .read(true)
                    .write(true)
                    .open(&self.path)?,
            );
        }
        let (kind, a, b): (u8, &[u8], &[u8]) = match item {
            Item::Block(b) => (1, b, &[]),
            Item::Note(p, w) => (2, p, w.as_bytes()),
            Item::End => (3, &[], &[]),
            // Never kept (see `push`).
            Item::Alive => return Ok(()),
        };
        let mut head = [0u8; ITEM_HEAD];
        head[0] = kind;
        head[1..5].copy_from_slice(&(a.len() as u32).to_le_bytes());
        head[5..9].copy_from_slice(&(b.len() as u32).to_le_bytes());
        let off = s.write_off;
        let f = s.file.as_mut().ok_or(std::io::ErrorKind::NotFound)?;
        f.write_all_at(&head, off)?;
        f.write_all_at(a, off + ITEM_HEAD as u64)?;
        f.write_all_at(b, off + (ITEM_HEAD + a.len()) as u64)?;
        s.write_off = off + (ITEM_HEAD + a.len() + b.len()) as u64;
        s.in_file += 1;
        Ok(())
    }

    /// Reads the file's oldest item not yet taken.
    fn take_from_file(&self, s: &mut State) -> std::io::Result<Item> {
        let f = s.file.as_ref().ok_or(std::io::ErrorKind::NotFound)?;
        let mut head = [0u8; ITEM_HEAD];
        f.read_exact_at(&mut head, s.read_off)?;
        let len = |r: std::ops::Range<usize>| {
            head.get(r)
                .and_then(|b| b.try_into().ok())
                .map_or(0, u32::from_le_bytes) as usize
        };
        let (la, lb) = (len(1..5), len(5..9));
        let mut a = vec![0u8; la];
        let mut b = vec![0u8; lb];
        f.read_exact_at(&mut a, s.read_off + ITEM_HEAD as u64)?;
        f.read_exact_at(&mut b, s.read_off + (ITEM_HEAD + la) as u64)?;
        s.read_off += (ITEM_HEAD + la + lb) as u64;
        s.in_file -= 1;
        if s.in_file == 0 {
            // Caught up: the file starts again, before its pages reach the disk.
            s.file.as_ref().map_or(Ok(()), |f| f.set_len(0))?;
            (s.read_off, s.write_off) = (0, 0);
        }
        match head[0] {
            1 => Ok(Item::Block(a)),
            2 => Ok(Item::Note(a, String::from_utf8_lossy(&b).into_owned())),
            3 => Ok(Item::End),
            k => Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("an item of unknown kind {k}"),
            )),
        }
    }

    /// The oldest item, waiting up to `wait` for one; [`Item::Alive`] when only a
    /// sign of life came since the last; none when nothing came.
    pub fn pop(&self, wait: Duration) -> Result<Option<Item>, Closed> {
        let mut s = self.lock();
        loop {
            if let Some(why) = &s.closed {
                return Err(Closed(why.clone()));
            }
            let item = if let Some(i) = s.mem.pop_front() {
                s.mem_bytes -= i.len();
                Some(i)
            } else if s.in_file > 0 {
                match self.take_from_file(&mut s) {
                    Ok(i) => Some(i),
                    Err(e) => {
                        let why = format!("read the spool {}: {e}", self.path.display());
                        s.closed = Some(why.clone());
                        return Err(Closed(why));
                    }
                }
            } else if s.alive {
                s.alive = false;
                return Ok(Some(Item::Alive));
            } else {
                None
            };
            if let Some(i) = item {
                // The item says the client is alive, as well.
                s.alive = false;
                drop(s);
                self.budget.give(i.len());
                self.counters.taken(i.len());
                self.changed.notify_all();
                return Ok(Some(i));
            }
            let (next, timeout) = (self.changed)
                .wait_timeout(s, wait)
                .unwrap_or_else(PoisonError::into_inner);
            s = next;
            if timeout.timed_out() && s.mem.is_empty() && s.in_file == 0 && !s.alive {
                return Ok(None);
            }
        }
    }

    /// The job is on a drive: blocks may wait in memory from now on.
    pub fn attach(&self) {
        self.lock().attached = true;
    }

    /// Nothing more goes in or out, for `why`; what was held is given back.
    pub fn close(&self, why: &str) {
        let mut s = self.lock();
        if s.closed.is_none() {
            s.closed = Some(why.to_string());
        }
        let mut held = s.mem_bytes;
        s.mem.clear();
        s.mem_bytes = 0;
        while s.in_file > 0 {
            match self.take_from_file(&mut s) {
                Ok(i) => held += i.len(),
                Err(_) => break,
            }
        }
        s.in_file = 0;
        s.file = None;
        drop(s);
        let _ = std::fs::remove_file(&self.path);
        self.budget.give(held);
        self.counters.taken(held);
        self.changed.notify_all();
    }
}

impl Drop for StreamSpool {
    fn drop(&mut self) {
        self.close("the job ended");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spool(dir: &std::path::Path, max: u64) -> (Arc<StreamSpool>, Arc<Budget>) {
        let budget = Arc::new(Budget::new(max));
        let s = StreamSpool::new(dir.join("s1"), budget.clone(), Arc::default());
        (Arc::new(s), budget)
    }

    const NONE: Duration = Duration::from_millis(10);

    #[test]
    fn items_come_out_in_order_through_memory_and_file() {
        let d = tempfile::tempdir().unwrap();
        let (s, budget) = spool(d.path(), 1 << 30);
        // Waiting for a drive: to the file.
        s.push(Item::Block(vec![1; 100])).unwrap();
        s.push(Item::Note(b"a/b".to_vec(), "denied".into()))
            .unwrap();
        assert!(d.path().join("s1").metadata().unwrap().len() > 100);
        s.attach();
        // The file is not caught up: still to the file.
        s.push(Item::Block(vec![2; 10])).unwrap();
        assert_eq!(s.pop(NONE).unwrap(), Some(Item::Block(vec![1; 100])));
        assert_eq!(
            s.pop(NONE).unwrap(),
            Some(Item::Note(b"a/b".to_vec(), "denied".into()))
        );
        assert_eq!(s.pop(NONE).unwrap(), Some(Item::Block(vec![2; 10])));
        // Caught up: the file is emptied and the next go to memory.
        assert_eq!(d.path().join("s1").metadata().unwrap().len(), 0);
        s.push(Item::Block(vec![3; 10])).unwrap();
        s.push(Item::End).unwrap();
        assert_eq!(d.path().join("s1").metadata().unwrap().len(), 0);
        assert_eq!(s.pop(NONE).unwrap(), Some(Item::Block(vec![3; 10])));
        assert_eq!(s.pop(NONE).unwrap(), Some(Item::End));
        assert_eq!(s.pop(NONE).unwrap(), None);
        assert_eq!(budget.used(), 0);
    }

    #[test]
    fn a_sign_of_life_is_told_once_and_takes_no_space() {
        let d = tempfile::tempdir().unwrap();
        let (s, budget) = spool(d.path(), 1 << 20);
        s.push(Item::Alive).unwrap();
        s.push(Item::Alive).unwrap();
        assert_eq!(budget.used(), 0);
        assert!(!d.path().join("s1").exists(), "not kept on the file");
        assert_eq!(s.pop(NONE).unwrap(), Some(Item::Alive));
        assert_eq!(s.pop(NONE).unwrap(), None);
        // An item says as much: the sign before it is not told after it.
        s.push(Item::Alive).unwrap();
        s.push(Item::Block(vec![1; 10])).unwrap();
        assert_eq!(s.pop(NONE).unwrap(), Some(Item::Block(vec![1; 10])));
        assert_eq!(s.pop(NONE).unwrap(), None);
        // A sign of life wakes a drive waiting for the stream.
        let s2 = s.clone();
        let popper = std::thread::spawn(move || s2.pop(Duration::from_secs(10)));
        std::thread::sleep(Duration::from_millis(100));
        s.push(Item::Alive).unwrap();
        assert_eq!(popper.join().unwrap(), Ok(Some(Item::Alive)));
        s.close("over");
        assert_eq!(s.push(Item::Alive), Err(Closed("over".into())));
    }

    #[test]
    fn a_full_spool_holds_the_sender_until_the_drive_takes() {
        let d = tempfile::tempdir().unwrap();
        let (s, budget) = spool(d.path(), 250);
        s.push(Item::Block(vec![0; 100])).unwrap();
        s.push(Item::Block(vec![0; 100])).unwrap();
        let s2 = s.clone();
        let sender = std::thread::spawn(move || s2.push(Item::Block(vec![9; 100])));
        std::thread::sleep(Duration::from_millis(300));
        assert!(budget.pressed(), "the third block waits for space");
        assert_eq!(budget.used(), 200);
        assert_eq!(s.pop(NONE).unwrap(), Some(Item::Block(vec![0; 100])));
        sender.join().unwrap().unwrap();
        assert!(!budget.pressed());
        assert_eq!(budget.used(), 200);
    }

    #[test]
    fn a_closed_spool_refuses_both_ends_and_gives_its_space_back() {
        let d = tempfile::tempdir().unwrap();
        let (s, budget) = spool(d.path(), 150);
        s.push(Item::Block(vec![0; 100])).unwrap();
        let s2 = s.clone();
        let sender = std::thread::spawn(move || s2.push(Item::Block(vec![0; 100])));
        std::thread::sleep(Duration::from_millis(100));
        s.close("the client went away");
        let why = Closed("the client went away".into());
        assert_eq!(sender.join().unwrap(), Err(why.clone()));
        assert_eq!(s.pop(NONE), Err(why));
        assert_eq!(budget.used(), 0);
        assert!(!d.path().join("s1").exists());
    }
}
