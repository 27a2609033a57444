//! The tests of `lock-impl/src/mysql/proto.rs` (once its `#[cfg(test)]` module).

use lock_impl::mysql::proto::*;

#[test]
fn an_ok_packets_info_is_length_encoded() {
    let ok = OkPacket {
        affected_rows: 1,
        last_insert_id: 7,
        status: status::AUTOCOMMIT,
        warnings: 0,
        info: "Rows matched: 1  Changed: 1  Warnings: 0".into(),
    };
    let bytes = ok.encode();
    assert_eq!(bytes[7], 40, "the info's length");
    assert_eq!(OkPacket::decode(&bytes).unwrap(), ok);
    let plain = OkPacket::default();
    assert_eq!(OkPacket::decode(&plain.encode()).unwrap(), plain);
}

#[test]
fn lenenc_round_trips() {
    for n in [
        0u64,
        250,
        251,
        0xffff,
        0x1_0000,
        0xff_ffff,
        0x100_0000,
        u64::MAX,
    ] {
        let mut b = Vec::new();
        put_lenenc(&mut b, n);
        assert_eq!(Reader::new(&b).lenenc("n").unwrap(), n);
    }
}

#[test]
fn native_password_checks() {
    let scramble = b"abcdefghijklmnopqrst";
    let answer = native_password(b"locksim", scramble);
    let hash = native_password_hash(b"locksim");
    assert!(check_native_password(&answer, scramble, &hash));
    assert!(!check_native_password(
        &native_password(b"wrong", scramble),
        scramble,
        &hash
    ));
}

#[test]
fn handshake_round_trips() {
    let h = Handshake {
        protocol_version: 10,
        server_version: "5.5.5-10.11.19-MariaDB-0+deb12u1".into(),
        connection_id: 7,
        scramble: b"abcdefghijklmnopqrst".to_vec(),
        capabilities: 0xf7fe | (0x81ff << 16),
        charset: 45,
        status: 2,
        mariadb_capabilities: 0x1d,
        auth_plugin: NATIVE_PASSWORD.into(),
    };
    assert_eq!(Handshake::decode(&h.encode()).unwrap(), h);
}

#[test]
fn truncated_packets_are_errors() {
    assert!(OkPacket::decode(&[0x00, 0x01]).is_err());
    assert!(Column::decode(&[3, b'd']).is_err());
    assert!(Handshake::decode(&[10, b'x']).is_err());
    assert!(split_packet(&[1, 0, 0]).unwrap().is_none());
}
