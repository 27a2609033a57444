//! The protected resource: a stock counter on its own host, read and written over the
//! network as in the flash sale of "redis之分布式锁详解" and Dewu's ticket walk-through
//! (read the stock, sell one, write it back).
//!
//! The storage keeps its own record of every read and write, including the value it
//! held when a write arrived, so the lost-update checker needs no trust in clients. In
//! fencing mode it rejects a write whose token is lower than the highest it accepted
//! (Kleppmann's fenced storage).

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use turmoil::net::{TcpListener, TcpStream};

use crate::history::{EventKind, StorageEvent};
use crate::recorder::Recorder;

/// The storage host's port.
pub const PORT: u16 = 7000;

/// One counter and its fencing high-water mark.
#[derive(Debug)]
struct Counter {
    value: i64,
    max_token: Option<u64>,
}

/// The counters: one, or one per segment of a segmented stock (each its own resource
/// behind its own lock, so each keeps its own fencing mark: the segments' locks issue
/// their tokens independently).
#[derive(Debug)]
struct Stock {
    counters: Vec<Counter>,
    fencing: bool,
    segmented: bool,
}

/// The storage's state, shared between its host and the world that reads the final
/// stock when the run ends.
#[derive(Debug, Clone)]
pub struct Shared(Arc<Mutex<Stock>>);

impl Shared {
    /// A counter at `initial`; `fencing` refuses stale tokens.
    pub fn new(initial: i64, fencing: bool) -> Self {
        Self::with(vec![initial], fencing, false)
    }

    /// A segmented stock: one counter per segment, at `initial[i]`.
    pub fn segmented(initial: Vec<i64>, fencing: bool) -> Self {
        Self::with(initial, fencing, true)
    }

    fn with(initial: Vec<i64>, fencing: bool, segmented: bool) -> Self {
        Self(Arc::new(Mutex::new(Stock {
            counters: initial
                .into_iter()
                .map(|value| Counter {
                    value,
                    max_token: None,
                })
                .collect(),
            fencing,
            segmented,
        })))
    }

    /// Serves one request line (see [`serve`]) and returns the reply line, recording
    /// the read or write in `recorder` at `at_us` (true µs): the storage of a real run, whose client
    /// processes send their requests to the parent.
    pub fn handle(&self, line: &str, recorder: &Recorder, at_us: u64) -> String {
        handle(line, &self.0, recorder, at_us)
    }

    /// Every counter's current value with its segment (`None`: the one counter).
    pub fn finals(&self) -> Vec<(Option<u32>, i64)> {
        let stock = self.0.lock().expect("storage state");
        stock
            .counters
            .iter()
            .enumerate()
            .map(|(i, c)| (stock.segmented.then_some(i as u32), c.value))
            .collect()
    }
}

/// Serves the storage protocol on `PORT` until the host stops.
///
/// Requests are lines: `R <reader> <token|-> [segment]` answers the value or
/// `REJECTED`; `W <writer> <read> <wrote> <token|-> [segment]` applies a write and
/// answers `OK` or `REJECTED`. The segment (a segmented stock's counter) is left out
/// for the one counter.
pub async fn serve(recorder: Recorder, shared: Shared) -> turmoil::Result {
    let listener = TcpListener::bind(("0.0.0.0", PORT)).await?;
    let stock = shared.0;
    loop {
        let (stream, _) = listener.accept().await?;
        let (stock, recorder) = (stock.clone(), recorder.clone());
        tokio::task::spawn_local(async move {
            let (read, mut write) = stream.into_split();
            let mut lines = BufReader::new(read).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let at_us = crate::clock::true_now().as_micros() as u64;
                let reply = handle(&line, &stock, &recorder, at_us);
                if write.write_all(reply.as_bytes()).await.is_err() {
                    break;
                }
            }
        });
    }
}

/// Fencing: a request carrying a token lower than the highest token seen is refused;
/// an equal or higher token is accepted and raises the mark. Reads count too: a
/// read-modify-write is only fenced if the resource refuses a stale holder's *read*
/// after a newer holder has read (otherwise the stale holder's write, arriving before
/// the newer holder's, would be accepted and the newer write would then lose it).
/// Requests without a token are never checked, so designs without tokens see a plain
/// storage.
fn admit(fencing: bool, counter: &mut Counter, token: Option<u64>) -> bool {
    let Some(t) = token else {
        return true;
    };
    if !fencing {
        return true;
    }
    if counter.max_token.is_some_and(|max| t < max) {
        return false;
    }
    counter.max_token = Some(t);
    true
}

/// The counter a request names: its segment (`Some` only on a segmented stock), or
/// `Err` with the reply for a segment that does not exist or is missing.
fn counter_of<'a>(
    stock: &'a mut Stock,
    segment: Option<&str>,
) -> Result<(&'a mut Counter, Option<u32>, bool), String> {
    let fencing = stock.fencing;
    match (stock.segmented, segment) {
        (false, None) => Ok((&mut stock.counters[0], None, fencing)),
        (true, Some(s)) => {
            let i = s
                .parse::<u32>()
                .map_err(|_| "ERR bad segment\n".to_string())?;
            let counter = stock
                .counters
                .get_mut(i as usize)
                .ok_or_else(|| "ERR no such segment\n".to_string())?;
            Ok((counter, Some(i), fencing))
        }
        (true, None) => Err("ERR segment required\n".into()),
        (false, Some(_)) => Err("ERR not segmented\n".into()),
    }
}

fn handle(line: &str, stock: &Mutex<Stock>, recorder: &Recorder, at_us: u64) -> String {
    let parts: Vec<&str> = line.split(' ').collect();
    let mut stock = stock.lock().expect("stock poisoned");
    match parts.as_slice() {
        ["R", reader, token, segment @ ..] if segment.len() <= 1 => {
            let (counter, segment, fencing) = match counter_of(&mut stock, segment.first().copied())
            {
                Ok(c) => c,
                Err(reply) => return reply,
            };
            let token = token.parse::<u64>().ok();
            let accepted = admit(fencing, counter, token);
            recorder.record_at(
                at_us,
                "storage",
                EventKind::Storage(StorageEvent::Read {
                    reader: reader.to_string(),
                    value: counter.value,
                    token,
                    accepted,
                    segment,
                }),
            );
            if accepted {
                format!("{}\n", counter.value)
            } else {
                "REJECTED\n".into()
            }
        }
        ["W", writer, read, wrote, token, segment @ ..] if segment.len() <= 1 => {
            let (Ok(read), Ok(wrote)) = (read.parse::<i64>(), wrote.parse::<i64>()) else {
                return "ERR bad numbers\n".into();
            };
            let (counter, segment, fencing) = match counter_of(&mut stock, segment.first().copied())
            {
                Ok(c) => c,
                Err(reply) => return reply,
            };
            let token = token.parse::<u64>().ok();
            let current = counter.value;
            let accepted = admit(fencing, counter, token);
            recorder.record_at(
                at_us,
                "storage",
                EventKind::Storage(StorageEvent::Write {
                    writer: writer.to_string(),
                    read,
                    wrote,
                    current,
                    token,
                    accepted,
                    segment,
                }),
            );
            if accepted {
                counter.value = wrote;
                "OK\n".into()
            } else {
                "REJECTED\n".into()
            }
        }
        _ => "ERR unknown request\n".into(),
    }
}

/// A client's connection to the storage.
pub struct StorageClient {
    lines: tokio::io::Lines<BufReader<turmoil::net::tcp::OwnedReadHalf>>,
    write: turmoil::net::tcp::OwnedWriteHalf,
    name: String,
}

impl StorageClient {
    /// Connects to the storage host as `name`.
    pub async fn connect(name: &str) -> std::io::Result<Self> {
        let stream = TcpStream::connect(("storage", PORT)).await?;
        let (read, write) = stream.into_split();
        Ok(Self {
            lines: BufReader::new(read).lines(),
            write,
            name: name.to_string(),
        })
    }

    async fn request(&mut self, line: String) -> std::io::Result<String> {
        self.write.write_all(line.as_bytes()).await?;
        self.lines
            .next_line()
            .await?
            .ok_or_else(|| std::io::Error::other("storage closed the connection"))
    }

    /// Reads the counter (of `segment`, on a segmented stock); `Ok(None)` if a fencing
    /// storage refused the token.
    pub async fn read(
        &mut self,
        token: Option<u64>,
        segment: Option<u32>,
    ) -> std::io::Result<Option<i64>> {
        let token = token.map_or("-".to_string(), |t| t.to_string());
        let reply = self
            .request(format!(
                "R {} {token}{}\n",
                self.name,
                segment_field(segment)
            ))
            .await?;
        if reply == "REJECTED" {
            return Ok(None);
        }
        reply
            .parse()
            .map(Some)
            .map_err(|_| std::io::Error::other(format!("bad storage reply {reply:?}")))
    }

    /// Writes `wrote` after having read `read` (to `segment`, on a segmented stock);
    /// `Ok(false)` if a fencing storage rejected it.
    pub async fn write(
        &mut self,
        read: i64,
        wrote: i64,
        token: Option<u64>,
        segment: Option<u32>,
    ) -> std::io::Result<bool> {
        let token = token.map_or("-".to_string(), |t| t.to_string());
        let reply = self
            .request(format!(
                "W {} {read} {wrote} {token}{}\n",
                self.name,
                segment_field(segment)
            ))
            .await?;
        Ok(reply == "OK")
    }
}

/// A request's trailing segment field: ` <segment>`, or nothing for the one counter.
fn segment_field(segment: Option<u32>) -> String {
    segment.map_or(String::new(), |s| format!(" {s}"))
}
