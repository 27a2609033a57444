use sim::redis::{Engine, Reply};
fn enc(r: &Reply, p3: bool, out: &mut Vec<u8>) {
    match r {
        Reply::Simple(s) => out.extend(format!("+{s}\r\n").bytes()),
        Reply::Error(s) => out.extend(format!("-{s}\r\n").bytes()),
        Reply::Integer(i) => out.extend(format!(":{i}\r\n").bytes()),
        Reply::Bulk(b) => {
            out.extend(format!("${}\r\n", b.len()).bytes());
            out.extend(b);
            out.extend(b"\r\n");
        }
        Reply::Nil => out.extend(if p3 { &b"_\r\n"[..] } else { b"$-1\r\n" }),
        Reply::NilArray => out.extend(if p3 { &b"_\r\n"[..] } else { b"*-1\r\n" }),
        Reply::Array(v) => {
            out.extend(format!("*{}\r\n", v.len()).bytes());
            for x in v {
                enc(x, p3, out)
            }
        }
        Reply::Push(v) => {
            out.extend(format!("{}{}\r\n", if p3 { ">" } else { "*" }, v.len()).bytes());
            for x in v {
                enc(x, p3, out)
            }
        }
        Reply::Map(v) => {
            if p3 {
                out.extend(format!("%{}\r\n", v.len()).bytes())
            } else {
                out.extend(format!("*{}\r\n", v.len() * 2).bytes())
            }
            for (k, x) in v {
                enc(k, p3, out);
                enc(x, p3, out)
            }
        }
        Reply::Double(d) => {
            let s = format!("{d}");
            if p3 {
                out.extend(format!(",{s}\r\n").bytes())
            } else {
                enc(&Reply::bulk(s), p3, out)
            }
        }
        Reply::Frames(v) => {
            for x in v {
                enc(x, p3, out)
            }
        }
    }
}
#[test]
fn diff() {
    let Ok(text) = std::fs::read_to_string("/tmp/diff/cmds.jsonl") else {
        return;
    };
    let mut e = Engine::new();
    let mut s = e.connect("x");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64;
    let mut lines = Vec::new();
    for l in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: Vec<serde_json::Value> = serde_json::from_str(l).unwrap();
        let argv: Vec<Vec<u8>> = v
            .iter()
            .filter_map(|x| x.as_str().map(|s| s.as_bytes().to_vec()))
            .collect();
        let r = e.execute(&mut s, &argv, now);
        let mut out = Vec::new();
        enc(&r, s.protocol == 3, &mut out);
        lines.push(serde_json::to_string(&String::from_utf8_lossy(&out)).unwrap());
    }
    std::fs::write("/tmp/diff/model.out", lines.join("\n") + "\n").unwrap();
}
