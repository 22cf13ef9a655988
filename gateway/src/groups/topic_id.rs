//! Topic ids (GROUP-CONSUMER-TOPIC-ID-1): KIP-848 names topics by id in ConsumerGroupHeartbeat,
//! and clients learn the ids from Metadata. Iggy has no Kafka topic id, so the gateway derives one
//! from the Kafka topic name: the first 16 bytes of SHA-256 over a fixed prefix and the name. Every
//! gateway derives the same id, with no state to share or lose.

use sha2::{Digest, Sha256};
use uuid::Uuid;

/// The id of Kafka topic `name`: never the nil id, nor Kafka's reserved metadata-topic id (1).
pub fn topic_id(name: &str) -> Uuid {
    let digest = Sha256::new()
        .chain_update(b"kafka-iggy-gateway topic id\0")
        .chain_update(name.as_bytes())
        .finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    // Two ids Kafka reserves (the nil id, and 1 for its metadata topic) have fifteen zero bytes.
    bytes[0] |= 0x80;
    Uuid::from_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_consumer_topic_id_1_ids_are_stable_distinct_and_never_reserved() {
        assert_eq!(topic_id("orders"), topic_id("orders"));
        assert_ne!(topic_id("orders"), topic_id("orders2"));
        assert_ne!(topic_id(""), Uuid::nil());
        assert_ne!(topic_id("x"), Uuid::from_u128(1));
    }
}
