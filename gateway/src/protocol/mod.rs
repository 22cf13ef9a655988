//! The Kafka wire: frames, request and response headers, and the advertised API versions.

pub mod api;
pub mod entries;
pub mod frame;
pub mod legacy;
pub mod request;
pub mod response_frame;
