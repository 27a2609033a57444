//! `sim::mysql::sql`'s own tests (moved from the module): the statements the designs
//! send, and MariaDB's errors for the rest.

use sim::mysql::sql::{Cond, Op, SetExpr, Statement, Value, parse};

#[test]
fn parses_the_designs_statements() {
    assert_eq!(
        parse("INSERT INTO locks (name, owner) VALUES ('k', 'o\\'1')").unwrap(),
        Statement::Insert {
            table: "locks".into(),
            ignore: false,
            columns: vec!["name".into(), "owner".into()],
            values: vec![Value::Str(b"k".to_vec()), Value::Str(b"o'1".to_vec())],
        }
    );
    assert_eq!(
        parse("select get_lock('k',0)").unwrap(),
        Statement::GetLock {
            name: Some(b"k".to_vec()),
            timeout: 0,
            column: "get_lock('k',0)".into()
        }
    );
    assert!(matches!(
        parse("DELETE FROM locks WHERE name = 'k' AND owner = 'o'").unwrap(),
        Statement::Delete { .. }
    ));
    assert_eq!(
        parse(
            "UPDATE t SET owner = 'o', fence = LAST_INSERT_ID(fence + 1) \
             WHERE name = 'k' AND expires_at < -5"
        )
        .unwrap(),
        Statement::Update {
            table: "t".into(),
            sets: vec![
                ("owner".into(), SetExpr::Value(Value::Str(b"o".to_vec()))),
                (
                    "fence".into(),
                    SetExpr::LastInsertId(Box::new(SetExpr::Plus("fence".into(), 1)))
                ),
            ],
            conds: vec![
                Cond {
                    column: "name".into(),
                    op: Op::Eq,
                    value: Value::Str(b"k".to_vec())
                },
                Cond {
                    column: "expires_at".into(),
                    op: Op::Lt,
                    value: Value::Int(-5)
                },
            ],
        }
    );
    assert!(matches!(
        parse("SELECT name FROM t WHERE name = 'k' FOR UPDATE").unwrap(),
        Statement::SelectForUpdate { .. }
    ));
    assert_eq!(parse("start transaction").unwrap(), Statement::Begin);
    assert!(matches!(
        parse("CREATE TABLE IF NOT EXISTS t (name VARCHAR(255) NOT NULL PRIMARY KEY, n BIGINT NOT NULL)")
            .unwrap(),
        Statement::Create { .. }
    ));
}

#[test]
fn refuses_with_mariadbs_errors() {
    let e = parse("FOO BAR").unwrap_err();
    assert_eq!(e.code, 1064);
    assert!(e.message.ends_with("near 'FOO BAR' at line 1"), "{e}");
    let e = parse("DELETE FROM locks WHERE name = 'k' AND owner = 'o1' AND").unwrap_err();
    assert!(e.message.ends_with("near '' at line 1"), "{e}");
    let e = parse("SELECT name FROM t WHERE name = 'k'").unwrap_err();
    assert!(e.message.ends_with("near '' at line 1"), "{e}");
    let e = parse("COMMIT WORK NOW").unwrap_err();
    assert!(e.message.ends_with("near 'WORK NOW' at line 1"), "{e}");
    let e = parse("SELECT GET_LOCK('k')").unwrap_err();
    assert_eq!(e.code, 1582);
    assert!(parse("SELECT 'unterminated").is_err());
    assert_eq!(parse("  ").unwrap_err().code, 1065);
}
