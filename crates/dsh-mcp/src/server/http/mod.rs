//! The server over Streamable HTTP ([`serve`]), on rmcp's transport, behind
//! our [`front`]: its options ([`options`]) come first, so the front and the
//! sessions read them without reading the serving loop.

mod access;
pub(crate) mod front;
pub(crate) mod options;
mod reply;
pub(crate) mod serve;
mod sessions;

#[cfg(test)]
mod tests;
