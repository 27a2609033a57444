//! Exit codes: one rule for every `locksim` command. 0 every verdict Valid, 1 some
//! Invalid, 2 bad input, 3 some Unknown (and none Invalid).
//!
//! The command front ends and the modules that work for them (gate, report, shard,
//! sweeps, explore) all take their codes from here, and this module imports none of
//! them: the imports go one way, so the rule lives in one place.

use scenarios::sweep::RunSummary;

/// Every verdict Valid.
pub const EXIT_VALID: u8 = 0;
/// Some verdict Invalid.
pub const EXIT_INVALID: u8 = 1;
/// Bad input.
pub const EXIT_BAD_INPUT: u8 = 2;
/// Some verdict Unknown, none Invalid.
pub const EXIT_UNKNOWN: u8 = 3;

/// The exit code for a set of summaries.
pub fn exit_code<'a>(runs: impl IntoIterator<Item = &'a RunSummary>) -> u8 {
    let (mut invalid, mut unknown) = (false, false);
    for r in runs {
        invalid |= r.verdicts.iter().any(|(_, v)| v.is_invalid());
        unknown |= r.verdicts.iter().any(|(_, v)| v.is_unknown());
    }
    code_of(invalid, unknown)
}

/// The exit code of several parts (cells, points), each with its own code: the same
/// rule over all their runs.
pub fn code_of_parts(codes: impl IntoIterator<Item = u8>) -> u8 {
    let (mut invalid, mut unknown) = (false, false);
    for code in codes {
        invalid |= code == EXIT_INVALID;
        unknown |= code == EXIT_UNKNOWN;
    }
    code_of(invalid, unknown)
}

/// The one rule: 1 if anything was invalid, else 3 if anything unknown, else 0.
pub fn code_of(invalid: bool, unknown: bool) -> u8 {
    if invalid {
        EXIT_INVALID
    } else if unknown {
        EXIT_UNKNOWN
    } else {
        EXIT_VALID
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_combine_as_their_runs_would() {
        assert_eq!(code_of_parts([]), EXIT_VALID);
        assert_eq!(code_of_parts([EXIT_VALID, EXIT_VALID]), EXIT_VALID);
        assert_eq!(code_of_parts([EXIT_VALID, EXIT_UNKNOWN]), EXIT_UNKNOWN);
        assert_eq!(
            code_of_parts([EXIT_UNKNOWN, EXIT_INVALID, EXIT_VALID]),
            EXIT_INVALID
        );
    }
}
