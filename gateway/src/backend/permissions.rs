//! Iggy 0.9.0-edge.5's permission rules, as pure functions over a user's permissions, for the
//! embedded model (AUTHZ-MODEL-1).
