//! The lines a foreign client sends (protocol version 1, `docs/clients.md`), read
//! into what the history records: `O` lines become the same operation and renewal
//! events the built-in client sends as `E <event json>`.

use sim::history::{EventKind, Op, OpF, Phase};

/// The protocol version this runner speaks.
pub const PROTOCOL: u32 = 1;

/// The tags a client's line may start with, after its hello.
pub(super) const TAGS: &str = "O (an operation), S (a storage request), P (at the pause \
    point), H (a retry horizon), X (done)";

/// A stamp may run ahead of the parent's own reading by this much (the two read the
/// same clock; this covers the moments between a client's reading and the parent's).
const AHEAD_US: u64 = 1_000_000;

/// One line of a client, read.
#[derive(Debug, PartialEq)]
pub(super) enum Line {
    /// An operation's event at `at_us`.
    Op { at_us: u64, op: Op },
    /// A renewal that succeeded, at `at_us`.
    Renewed { at_us: u64, kind: EventKind },
    /// A renewal attempt, or one that failed: the history has no event for it.
    RenewAttempt,
    /// A storage request.
    Storage(String),
    /// At the pause point before a write.
    PausePoint,
    /// The client's retry horizon, ms.
    Horizon(u64),
    /// Done.
    Done,
}

/// The client's name in its hello line `V <version> <name>`, or why the line is not
/// a hello this runner accepts.
pub(super) fn hello(line: &str) -> Result<String, String> {
    let mut parts = line.splitn(3, ' ');
    if parts.next() != Some("V") {
        return Err(format!(
            "its first line must be its hello `V {PROTOCOL} <client name>`"
        ));
    }
    let version = parts.next().unwrap_or("");
    let name = parts.next().unwrap_or("").trim();
    match version.parse::<u32>() {
        Ok(PROTOCOL) if !name.is_empty() => Ok(name.to_string()),
        Ok(PROTOCOL) => Err(format!(
            "its hello names no client: `V {PROTOCOL} <client name>`"
        )),
        Ok(v) => Err(format!(
            "it speaks protocol version {v}, and this locksim speaks version {PROTOCOL} only"
        )),
        Err(_) => Err(format!(
            "its hello's version `{version}` is not a number (this locksim speaks \
             version {PROTOCOL}: `V {PROTOCOL} <client name>`)"
        )),
    }
}

/// Reads one line after the hello; `now_us` is the parent's reading of the run's
/// clock, `key` the workload's lock key (an operation's default key).
pub(super) fn parse(line: &str, now_us: u64, key: &str) -> Result<Line, String> {
    let (tag, rest) = line.split_once(' ').unwrap_or((line, ""));
    match tag {
        "O" => op(rest, now_us, key),
        "S" if !rest.is_empty() => Ok(Line::Storage(rest.to_string())),
        "S" => Err(
            "a storage request needs its request: `S R <client> <token>` or \
                    `S W <client> <read> <value> <token>`"
                .into(),
        ),
        "P" => Ok(Line::PausePoint),
        "H" => rest
            .trim()
            .parse()
            .map(Line::Horizon)
            .map_err(|_| format!("`H` takes a whole number of ms, not `{rest}`")),
        "X" => Ok(Line::Done),
        "V" => Err("a second hello".into()),
        _ => Err(format!("unknown tag `{tag}`; a line starts with {TAGS}")),
    }
}

/// `O <at_us> <id> <phase> <op> [field=value ...] [detail=<text to the line's end>]`.
fn op(rest: &str, now_us: u64, key: &str) -> Result<Line, String> {
    let mut words = rest.splitn(5, ' ');
    let mut next = |what: &str| {
        words.next().filter(|w| !w.is_empty()).ok_or_else(|| {
            format!("an `O` line is `O <at_us> <id> <phase> <op> [field=value ...]`: no {what}")
        })
    };
    let at = next("stamp")?;
    let at_us: u64 = at
        .parse()
        .map_err(|_| format!("the stamp `{at}` is not a whole number of µs"))?;
    if at_us > now_us + AHEAD_US {
        return Err(format!(
            "the stamp {at_us} µs is ahead of the run's clock ({now_us} µs): stamp with \
             the machine's monotonic clock (CLOCK_MONOTONIC) in µs since the \
             configuration's epoch_ns"
        ));
    }
    let id = next("operation id")?;
    let id: u64 = id
        .parse()
        .map_err(|_| format!("the operation id `{id}` is not a whole number"))?;
    let phase = match next("phase")? {
        "invoke" => Phase::Invoke,
        "ok" => Phase::Ok,
        "fail" => Phase::Fail,
        "info" => Phase::Info,
        other => {
            return Err(format!(
                "phase `{other}`: allowed are invoke, ok, fail, info"
            ));
        }
    };
    let f = match next("operation")? {
        "acquire" => Some(OpF::Acquire),
        "release" => Some(OpF::Release),
        "read" => Some(OpF::Read),
        "write" => Some(OpF::Write),
        "renew" => None,
        other => {
            return Err(format!(
                "operation `{other}`: allowed are acquire, release, renew, read, write"
            ));
        }
    };
    let fields = fields(words.next().unwrap_or(""))?;
    let mut op = Op {
        op: id,
        f: f.unwrap_or(OpF::Acquire),
        phase,
        key: Some(fields.key.unwrap_or_else(|| key.to_string())),
        owner: fields.owner,
        value: fields.value,
        token: fields.token,
        valid_until_us: fields.valid_ms.map(|ms| at_us.saturating_add(ms * 1000)),
        detail: fields.detail,
        mode: None,
    };
    let Some(f) = f else {
        return renewal(at_us, op);
    };
    // As the built-in client records them: a grant and a release hold one count.
    let holds = matches!(
        (f, phase),
        (OpF::Acquire, Phase::Ok) | (OpF::Release, Phase::Invoke)
    );
    if holds && op.value.is_none() {
        op.value = Some(1);
    }
    if !matches!(f, OpF::Acquire | OpF::Release) {
        op.key = None;
    }
    Ok(Line::Op { at_us, op })
}

/// A `renew` line: an `ok` one is a renewal the history records.
fn renewal(at_us: u64, op: Op) -> Result<Line, String> {
    if op.phase != Phase::Ok {
        return Ok(Line::RenewAttempt);
    }
    let owner = op.owner.ok_or("an `ok renew` needs owner=<owner value>")?;
    let valid_until_us = op
        .valid_until_us
        .ok_or("an `ok renew` needs valid_ms=<ms of validity the renewal gives>")?;
    Ok(Line::Renewed {
        at_us,
        kind: EventKind::Renewed {
            key: op.key.unwrap_or_default(),
            owner,
            valid_until_us,
        },
    })
}

#[derive(Default)]
struct Fields {
    key: Option<String>,
    owner: Option<String>,
    token: Option<u64>,
    value: Option<i64>,
    valid_ms: Option<u64>,
    detail: Option<String>,
}

/// `field=value` words; `detail=` takes the rest of the line.
fn fields(mut rest: &str) -> Result<Fields, String> {
    let mut f = Fields::default();
    while !rest.is_empty() {
        if let Some(detail) = rest.strip_prefix("detail=") {
            f.detail = Some(detail.to_string());
            break;
        }
        let (word, tail) = rest.split_once(' ').unwrap_or((rest, ""));
        rest = tail;
        if word.is_empty() {
            continue;
        }
        let (name, value) = word
            .split_once('=')
            .ok_or_else(|| format!("`{word}` is not field=value"))?;
        let number = |what: &str| format!("field {name}: `{value}` is not {what}");
        match name {
            "key" => f.key = Some(value.to_string()),
            "owner" => f.owner = Some(value.to_string()),
            "token" => f.token = Some(value.parse().map_err(|_| number("a whole number"))?),
            "value" => f.value = Some(value.parse().map_err(|_| number("an integer"))?),
            "valid_ms" => {
                f.valid_ms = Some(value.parse().map_err(|_| number("a whole number of ms"))?)
            }
            _ => {
                return Err(format!(
                    "unknown field `{name}`: allowed are key, owner, token, value, valid_ms, \
                     detail (last: the rest of the line)"
                ));
            }
        }
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hello_names_the_client_and_its_version() {
        assert_eq!(hello("V 1 redis-py 5.3.1").unwrap(), "redis-py 5.3.1");
        let e = hello("V 2 x").unwrap_err();
        assert!(e.contains("version 2") && e.contains("version 1"), "{e}");
        assert!(hello("hello").unwrap_err().contains("V 1 <client name>"));
        assert!(hello("V 1").unwrap_err().contains("names no client"));
    }

    #[test]
    fn operation_lines_become_the_histories_ops() {
        let Line::Op { at_us, op } = parse(
            "O 1500 3 ok acquire owner=c1-7 token=42 valid_ms=180 detail=took 2 tries",
            2000,
            "lock",
        )
        .unwrap() else {
            panic!("an op")
        };
        assert_eq!(at_us, 1500);
        assert_eq!((op.op, op.f, op.phase), (3, OpF::Acquire, Phase::Ok));
        assert_eq!(op.owner.as_deref(), Some("c1-7"));
        assert_eq!(op.token, Some(42));
        assert_eq!(op.valid_until_us, Some(181_500));
        assert_eq!(op.value, Some(1));
        assert_eq!(op.key.as_deref(), Some("lock"));
        assert_eq!(op.detail.as_deref(), Some("took 2 tries"));
        let Line::Op { op, .. } = parse("O 10 4 ok read value=99", 20, "lock").unwrap() else {
            panic!("an op")
        };
        assert_eq!((op.f, op.value, op.key), (OpF::Read, Some(99), None));
        assert!(matches!(
            parse("O 10 5 ok renew owner=a valid_ms=200", 20, "k").unwrap(),
            Line::Renewed { .. }
        ));
        assert_eq!(
            parse("O 10 5 fail renew", 20, "k").unwrap(),
            Line::RenewAttempt
        );
    }

    #[test]
    fn a_bad_line_says_what_is_wrong_with_it() {
        let e = |l: &str| parse(l, 5_000_000, "k").unwrap_err();
        assert!(e("hello world").contains("unknown tag `hello`"));
        assert!(e("O 10 1 done acquire").contains("allowed are invoke, ok, fail, info"));
        assert!(e("O 10 1 ok lock").contains("allowed are acquire, release, renew"));
        assert!(e("O 10 1 ok acquire color=red").contains("unknown field `color`"));
        assert!(e("O 10 1 ok acquire token=x").contains("field token"));
        assert!(e("O 1733600000000000 1 ok acquire").contains("CLOCK_MONOTONIC"));
        assert!(e("O 10").contains("no operation id"));
        assert!(e("V 1 again").contains("second hello"));
        assert!(e("H soon").contains("whole number of ms"));
    }
}
