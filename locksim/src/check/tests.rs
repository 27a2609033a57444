//! The check builder's own helpers: the seeds variable, the classes, shell quoting.

use super::run::{parse_seeds_env, shell_word};
use super::*;

#[test]
fn the_seeds_variable_takes_a_count_or_a_range() {
    assert_eq!(parse_seeds_env("50", 10), Ok(10..60));
    assert_eq!(parse_seeds_env(" 5..9 ", 0), Ok(5..9));
    for bad in ["0", "9..3", "x", "1..x"] {
        let e = parse_seeds_env(bad, 0).unwrap_err();
        assert!(e.contains(SEEDS_ENV) && e.contains(bad), "{e}");
    }
}

#[test]
fn classes_pass_at_their_level_or_better_and_unknown_only_when_asked() {
    use scenarios::checkers::Safety::*;
    assert!(class_passes(Safe, Fenced));
    assert!(class_passes(Fenced, Fenced));
    assert!(class_passes(Promise, Fenced));
    assert!(!class_passes(Unsafe, Fenced));
    assert!(!class_passes(Unknown, Fenced));
    assert!(class_passes(Unknown, Unknown));
    assert!(!class_passes(Fenced, Safe));
}

#[test]
fn shell_words_are_quoted_only_when_needed() {
    assert_eq!(shell_word("broken/constant-owner"), "broken/constant-owner");
    assert_eq!(shell_word("/tmp/a b.json"), "'/tmp/a b.json'");
    assert_eq!(shell_word("it's"), r"'it'\''s'");
}
