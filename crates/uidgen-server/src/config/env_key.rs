//! What each section says about its environment variables: a key's path and how its text is
//! read. A file of its own, below both the sections (each lists its keys next to their struct)
//! and `env.rs` (which reads the variables of every section), so that neither file imports
//! the other back.

/// How a variable's text is read into a key.
#[derive(Clone, Copy)]
pub(crate) enum Kind {
    /// Taken as it is.
    Str,
    /// An integer.
    Int,
    /// A number.
    Float,
    /// `true` or `false`.
    Bool,
}

/// A key's path (`["segment", "max_step"]`) and how its variable's text is read.
pub(crate) type EnvKey = (&'static [&'static str], Kind);
