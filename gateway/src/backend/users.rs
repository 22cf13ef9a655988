//! Iggy users and personal access tokens as the embedded model keeps them (AUTHZ-MODEL-1).
