//! `scenarios::params`'s unit tests, moved here from the module: the `scenarios`
//! library has no unit-test harness, which would compile it a second time.

use scenarios::params::*;

#[test]
fn ranges_lists_and_single_values_parse() {
    let r = ParamRange::parse("pause-ms=50..200:50").unwrap();
    assert_eq!(r.param, Param::PauseMs);
    assert_eq!(r.values, vec![50, 100, 150, 200]);
    assert_eq!(
        ParamRange::parse("drift-ppm=0,5000").unwrap().values,
        vec![0, 5000]
    );
    assert_eq!(
        ParamRange::parse("clients=2..4").unwrap().values,
        vec![2, 3, 4]
    );
    assert_eq!(
        ParamRange::parse_one("lag-ms=30").unwrap(),
        (Param::LagMs, 30)
    );
}

#[test]
fn bad_parameters_name_the_flag_and_what_is_allowed() {
    for (text, says) in [
        ("pause=5", "unknown parameter 'pause'"),
        ("pause-ms", "no '='"),
        ("pause-ms=9..3", "backwards"),
        ("pause-ms=1..9:0", "step"),
        ("pause-ms=x", "not a whole number"),
        ("pause-ms=0", "outside"),
        ("clients=1..100000", "more than"),
    ] {
        let e = ParamRange::parse(text).unwrap_err();
        assert!(e.contains(says) && e.contains("--param"), "{text}: {e}");
        assert!(e.contains("pause-ms, delay-ms"), "{text}: {e}");
    }
    let e = ParamRange::parse_one("pause-ms=1,2").unwrap_err();
    assert!(e.contains("one value"), "{e}");
}
