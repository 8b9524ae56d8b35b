//! The recording of a run: the checks with their verdicts, the outcome that
//! becomes the snapshot, and what the client itself said (for
//! `secrets_absent`), normalized so two machines render the same text.

use std::fmt::Debug;

use super::{Check, subject::Failure};
use crate::{
    outcome::{Normalizer, Outcome, StepOutcome},
    scenario::{Bucket, ReplyExpect},
};

pub(crate) struct Recording {
    pub name: String,
    pub outcome: Outcome,
    pub checks: Vec<Check>,
    /// What the client itself said: error messages and Debug output.
    pub words: Vec<String>,
    pub normalizer: Normalizer,
    /// Why the scenario does not apply to this client (a precondition the
    /// fixture's ledger shows failed): the run stops there.
    pub skipped: Option<String>,
}

impl Recording {
    pub fn new(name: &str, normalizer: Normalizer) -> Self {
        Self {
            name: name.to_owned(),
            outcome: Outcome::default(),
            checks: Vec::new(),
            words: Vec::new(),
            normalizer,
            skipped: None,
        }
    }

    pub fn check(&mut self, id: &str, passed: bool, message: impl Into<String>) {
        self.checks.push(Check {
            id: format!("{}::{id}", self.name),
            passed,
            message: message.into(),
        });
    }

    pub fn push(&mut self, out: StepOutcome) {
        self.outcome.steps.push(out);
    }

    /// A step's outcome; with an expected bucket, checks it and shows the
    /// bucket in the snapshot.
    pub fn timed<B>(&mut self, id: &str, step: &str, got: B, expected: Option<B>) -> StepOutcome
    where
        B: Copy + PartialEq + Debug + Into<Bucket>,
    {
        if let Some(expected) = expected {
            self.check(
                &format!("{id}.within"),
                got == expected,
                format!("{step} took {}, expected {}", got.into(), expected.into()),
            );
        }
        StepOutcome {
            step: step.into(),
            time: expected.map(|_| got.into()),
            ..StepOutcome::default()
        }
    }

    /// A request-like step succeeded: right unless it had to fail.
    pub fn reply_ok(&mut self, id: &str, expect: &dyn ReplyExpect, out: &mut StepOutcome) {
        out.result = "ok".into();
        match expect.error() {
            Some(kind) => self.check(
                &format!("{id}.result"),
                false,
                format!("{} succeeded, expected error {kind}", out.step),
            ),
            None => self.check(
                &format!("{id}.result"),
                true,
                format!("{} succeeded", out.step),
            ),
        }
    }

    /// A request-like step failed: right if it had to, with that kind (when
    /// the subject can tell kinds) and those words in its message.
    pub fn reply_err(
        &mut self,
        id: &str,
        expect: &dyn ReplyExpect,
        failure: &Failure,
        out: &mut StepOutcome,
    ) {
        self.words.extend(failure.words.iter().cloned());
        let full = &failure.message;
        out.result = "error".into();
        out.kind = failure.kind.map(|kind| kind.to_string());
        out.message = Some(
            self.normalizer
                .apply(full.lines().next().unwrap_or_default()),
        );
        match (expect.error(), failure.kind) {
            (Some(expected), Some(kind)) => self.check(
                &format!("{id}.error"),
                expected == kind,
                format!(
                    "{} failed with {kind}, expected {expected}: {full}",
                    out.step
                ),
            ),
            // An external client's errors have no kinds: failing is all
            // that can be checked.
            (Some(expected), None) => self.check(
                &format!("{id}.error"),
                true,
                format!("{} failed (expected {expected}): {full}", out.step),
            ),
            (None, _) => self.check(
                &format!("{id}.result"),
                false,
                format!("{} failed: {full}", out.step),
            ),
        }
        if failure.kind.is_none() {
            // The message is the client's own wording, not this project's.
            return;
        }
        for needle in expect.message_contains() {
            self.check(
                &format!("{id}.message"),
                full.contains(needle.as_str()),
                format!("message must contain {needle:?}: {full}"),
            );
        }
        for needle in expect.message_not_contains() {
            self.check(
                &format!("{id}.message"),
                !full.contains(needle.as_str()),
                format!("message must not contain {needle:?}: {full}"),
            );
        }
    }
}
