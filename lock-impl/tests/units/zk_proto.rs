//! The tests of `lock-impl/src/zk/proto/` (once its `#[cfg(test)]` module).

use lock_impl::zk::proto::*;

#[test]
fn every_request_round_trips_through_its_frame() {
    let reqs = vec![
        Request::Ping,
        Request::CloseSession,
        Request::Create {
            op: op::CREATE2,
            req: CreateRequest {
                path: "/a/b-".into(),
                data: None,
                acl: Acl::open_unsafe(),
                flags: create_mode::EPHEMERAL_SEQUENTIAL,
            },
        },
        Request::Delete {
            path: "/a".into(),
            version: -1,
        },
        Request::Exists {
            path: "/a".into(),
            watch: true,
        },
        Request::GetChildren2 {
            path: "/".into(),
            watch: false,
        },
        Request::Multi(vec![
            MultiOp::Check {
                path: "/a".into(),
                version: 3,
            },
            MultiOp::Delete {
                path: "/a".into(),
                version: -1,
            },
        ]),
    ];
    for req in reqs {
        let frame = req.to_frame(7);
        let (payload, used) = split_frame(&frame).unwrap().unwrap();
        assert_eq!(used, frame.len());
        assert_eq!(Request::read(payload).unwrap(), (7, req));
    }
}

#[test]
fn truncated_and_lying_frames_are_errors_not_panics() {
    let frame = Request::Exists {
        path: "/abc".into(),
        watch: true,
    }
    .to_frame(1);
    for cut in 4..frame.len() - 1 {
        assert!(Request::read(&frame[4..cut]).is_err(), "cut={cut}");
    }
    // A vector count far beyond the frame.
    let mut w = Writer::new();
    w.int(i32::MAX);
    assert!(Reader::new(&w.into_bytes()).strings("children").is_err());
    assert!(split_frame(&[0xff, 0xff, 0xff, 0xff]).is_err());
    assert!(split_frame(&[0, 0, 0, 9, 1]).unwrap().is_none());
}

#[test]
fn connect_request_without_read_only_is_an_old_client() {
    let mut req = ConnectRequest {
        protocol_version: 0,
        last_zxid_seen: 0,
        timeout_ms: 30_000,
        session_id: 0,
        passwd: vec![0; 16],
        read_only: None,
    };
    let frame = req.to_frame();
    assert_eq!(ConnectRequest::read(&frame[4..]).unwrap(), req);
    req.read_only = Some(false);
    let frame = req.to_frame();
    assert_eq!(frame.len(), 4 + 4 + 8 + 4 + 8 + 4 + 16 + 1);
    assert_eq!(ConnectRequest::read(&frame[4..]).unwrap(), req);
}
