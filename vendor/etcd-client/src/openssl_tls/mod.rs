#![cfg(feature = "tls-openssl")]

mod backoff;
mod transport;

pub use self::transport::*;
