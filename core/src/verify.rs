//! The verifier: one pass that checks every invariant of [`crate::ir`].
//! (Being written: for now it accepts every program.)

use crate::ir::{Loc, Program};

/// A program breaks an invariant: which op, where it was built, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{op}` at {loc}: {kind}")]
pub struct VerifyError {
    pub op: String,
    pub loc: Loc,
    pub kind: VerifyErrorKind,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyErrorKind {
    #[error("{0}")]
    Other(String),
}

pub fn verify(_program: &Program) -> Result<(), VerifyError> {
    Ok(())
}
