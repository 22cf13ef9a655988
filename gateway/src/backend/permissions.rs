//! Iggy 0.9.0-edge.5's permission rules, as pure functions over a user's permissions, for the
//! embedded model (AUTHZ-MODEL-1).
//!
//! Each function takes the acting user's `Option<&Permissions>` (`None`: the user has no
//! permissions at all, so every rule denies) and answers `Ok(())` or the error the real server
//! answers for a denial. Facts relied on (paths under the server's `core/`):
//!
//! - **Ids are 0-based.** Streams, topics (per stream) and users are slab keys starting at 0;
//!   a freed key is reused, lowest first (`metadata/src/stm/stream.rs`, `stm/id_slab.rs`).
//!   `Permissions::streams` and `StreamPermissions::topics` are keyed by those ids.
//! - **Every denial is `IggyError::Unauthorized` (41)** (`metadata/src/permissioner/`). A
//!   request with no session is `Unauthenticated` (40) before any rule runs.
//! - **Rules run only once the names resolve**: the server resolves stream/topic first and,
//!   when it cannot, skips the rule and answers "not found" (or an empty poll), so a missing
//!   stream is `StreamNotFound`/`ResourceNotFound` even for a user with no grants
//!   (`metadata/src/stm/authz.rs`, `server/src/dispatch/authz.rs`, `server/src/dispatch.rs`).
//! - **Root (user 0) bypasses the control-plane gate** (`stm/authz.rs`); on reads and the
//!   partition plane it runs the rules with its full, immutable grants, so the answer is the same.
//! - **Where each rule gates** (`stm/authz.rs` for replicated ops, `dispatch/authz.rs` and
//!   `dispatch.rs` for reads and the partition plane):
//!   - GetStreams: all-or-nothing, needs global `read_streams`/`manage_streams`; the list is not
//!     filtered per stream, and stream-level grants do not help.
//!   - GetStream: global or that stream's `read_stream`/`manage_stream` (not `read_topics`).
//!   - GetTopics: needs global or stream-level read/manage of streams or topics; a topic-level
//!     grant is not enough. The list is not filtered per topic.
//!   - GetTopic, and every consumer-group op (create, delete, get, list, join, leave): the
//!     `get_topic` read rule, so creating a group needs read access, not manage.
//!   - CreateStream: global `manage_streams`. Update/Delete/Purge stream: global
//!     `manage_streams` or that stream's `manage_stream`.
//!   - CreateTopic: global or stream-level `manage_streams`/`manage_stream`/`manage_topics`.
//!     Update/Delete/Purge topic, create/delete partitions, delete segments: that plus the
//!     topic's `manage_topic`.
//!   - PollMessages is gated by `poll_messages`; Get/Store/Delete consumer offset by the same
//!     rule. SendMessages by `append_messages`.
//! - **Inheritance**: for reading, `manage_streams` ⊇ `read_streams` ⊇ `read_topics` ⊇
//!   `poll_messages` (global `manage_topics` also grants reads and polls); for writing,
//!   `manage_streams` ⊇ `manage_topics` ⊇ `send_messages`. Reading never grants sending. At
//!   topic level `manage_topic` grants read, poll and send; `read_topic` grants read and poll.

use iggy_common::{IggyError, Permissions, StreamPermissions, TopicPermissions};

fn deny() -> Result<(), IggyError> {
    Err(IggyError::Unauthorized)
}

fn allow_if(granted: bool) -> Result<(), IggyError> {
    if granted {
        Ok(())
    } else {
        deny()
    }
}

fn stream_of(perms: &Permissions, stream: usize) -> Option<&StreamPermissions> {
    perms.streams.as_ref()?.get(&stream)
}

fn topic_of(stream_perms: &StreamPermissions, topic: usize) -> Option<&TopicPermissions> {
    stream_perms.topics.as_ref()?.get(&topic)
}

/// GetStreams: all-or-nothing on global `read_streams`/`manage_streams`.
pub fn get_streams(perms: Option<&Permissions>) -> Result<(), IggyError> {
    let Some(p) = perms else { return deny() };
    allow_if(p.global.manage_streams || p.global.read_streams)
}

/// GetStream.
pub fn get_stream(perms: Option<&Permissions>, stream: usize) -> Result<(), IggyError> {
    let Some(p) = perms else { return deny() };
    if p.global.manage_streams || p.global.read_streams {
        return Ok(());
    }
    allow_if(stream_of(p, stream).is_some_and(|s| s.manage_stream || s.read_stream))
}

/// CreateStream: global `manage_streams` only.
pub fn create_stream(perms: Option<&Permissions>) -> Result<(), IggyError> {
    let Some(p) = perms else { return deny() };
    allow_if(p.global.manage_streams)
}

/// UpdateStream, DeleteStream, PurgeStream.
pub fn manage_stream(perms: Option<&Permissions>, stream: usize) -> Result<(), IggyError> {
    let Some(p) = perms else { return deny() };
    if p.global.manage_streams {
        return Ok(());
    }
    allow_if(stream_of(p, stream).is_some_and(|s| s.manage_stream))
}

fn global_reads_topics(p: &Permissions) -> bool {
    let g = &p.global;
    g.read_streams || g.manage_streams || g.manage_topics || g.read_topics
}

fn stream_reads_topics(s: &StreamPermissions) -> bool {
    s.manage_stream || s.read_stream || s.manage_topics || s.read_topics
}

/// GetTopics: stream-level (or global) read of the stream or its topics; topic grants don't count.
pub fn get_topics(perms: Option<&Permissions>, stream: usize) -> Result<(), IggyError> {
    let Some(p) = perms else { return deny() };
    if global_reads_topics(p) {
        return Ok(());
    }
    allow_if(stream_of(p, stream).is_some_and(stream_reads_topics))
}

/// GetTopic.
pub fn get_topic(perms: Option<&Permissions>, stream: usize, topic: usize) -> Result<(), IggyError> {
    let Some(p) = perms else { return deny() };
    if global_reads_topics(p) {
        return Ok(());
    }
    let Some(s) = stream_of(p, stream) else { return deny() };
    if stream_reads_topics(s) {
        return Ok(());
    }
    allow_if(topic_of(s, topic).is_some_and(|t| t.manage_topic || t.read_topic))
}

/// CreateTopic.
pub fn create_topic(perms: Option<&Permissions>, stream: usize) -> Result<(), IggyError> {
    let Some(p) = perms else { return deny() };
    if p.global.manage_streams || p.global.manage_topics {
        return Ok(());
    }
    allow_if(stream_of(p, stream).is_some_and(|s| s.manage_stream || s.manage_topics))
}

/// UpdateTopic, DeleteTopic, PurgeTopic, CreatePartitions, DeletePartitions, DeleteSegments.
pub fn manage_topic(perms: Option<&Permissions>, stream: usize, topic: usize) -> Result<(), IggyError> {
    let Some(p) = perms else { return deny() };
    if p.global.manage_streams || p.global.manage_topics {
        return Ok(());
    }
    let Some(s) = stream_of(p, stream) else { return deny() };
    if s.manage_stream || s.manage_topics {
        return Ok(());
    }
    allow_if(topic_of(s, topic).is_some_and(|t| t.manage_topic))
}

/// SendMessages.
pub fn append_messages(perms: Option<&Permissions>, stream: usize, topic: usize) -> Result<(), IggyError> {
    let Some(p) = perms else { return deny() };
    let g = &p.global;
    if g.send_messages || g.manage_streams || g.manage_topics {
        return Ok(());
    }
    let Some(s) = stream_of(p, stream) else { return deny() };
    if s.send_messages || s.manage_stream || s.manage_topics {
        return Ok(());
    }
    allow_if(topic_of(s, topic).is_some_and(|t| t.manage_topic || t.send_messages))
}

/// PollMessages.
pub fn poll_messages(perms: Option<&Permissions>, stream: usize, topic: usize) -> Result<(), IggyError> {
    let Some(p) = perms else { return deny() };
    if p.global.poll_messages || global_reads_topics(p) {
        return Ok(());
    }
    let Some(s) = stream_of(p, stream) else { return deny() };
    if s.poll_messages || stream_reads_topics(s) {
        return Ok(());
    }
    allow_if(topic_of(s, topic).is_some_and(|t| t.manage_topic || t.read_topic || t.poll_messages))
}

/// CreateConsumerGroup, DeleteConsumerGroup, GetConsumerGroup, GetConsumerGroups,
/// JoinConsumerGroup, LeaveConsumerGroup: all the `get_topic` read rule.
pub fn consumer_group(perms: Option<&Permissions>, stream: usize, topic: usize) -> Result<(), IggyError> {
    get_topic(perms, stream, topic)
}

/// GetConsumerOffset, StoreConsumerOffset, DeleteConsumerOffset: all the `poll_messages` rule.
pub fn consumer_offset(perms: Option<&Permissions>, stream: usize, topic: usize) -> Result<(), IggyError> {
    poll_messages(perms, stream, topic)
}

/// GetUsers, GetUser (of another user; a user may always read itself).
pub fn read_users(perms: Option<&Permissions>) -> Result<(), IggyError> {
    let Some(p) = perms else { return deny() };
    allow_if(p.global.manage_users || p.global.read_users)
}

/// CreateUser, DeleteUser, UpdateUser, UpdatePermissions, ChangePassword (of another user; a
/// user may always change its own password).
pub fn manage_users(perms: Option<&Permissions>) -> Result<(), IggyError> {
    let Some(p) = perms else { return deny() };
    allow_if(p.global.manage_users)
}

#[cfg(test)]
mod tests {
    use super::*;
    use iggy_common::GlobalPermissions;
    use std::collections::BTreeMap;

    const S: usize = 0;
    const T: usize = 0;
    const OTHER_S: usize = 1;
    const OTHER_T: usize = 1;

    fn global(f: impl FnOnce(&mut GlobalPermissions)) -> Permissions {
        let mut p = Permissions::default();
        f(&mut p.global);
        p
    }

    fn stream(f: impl FnOnce(&mut StreamPermissions)) -> Permissions {
        let mut s = StreamPermissions::default();
        f(&mut s);
        Permissions {
            global: GlobalPermissions::default(),
            streams: Some(BTreeMap::from([(S, s)])),
        }
    }

    fn topic(f: impl FnOnce(&mut TopicPermissions)) -> Permissions {
        let mut t = TopicPermissions::default();
        f(&mut t);
        let s = StreamPermissions {
            topics: Some(BTreeMap::from([(T, t)])),
            ..Default::default()
        };
        Permissions {
            global: GlobalPermissions::default(),
            streams: Some(BTreeMap::from([(S, s)])),
        }
    }

    fn denied(r: Result<(), IggyError>) -> bool {
        matches!(r, Err(IggyError::Unauthorized))
    }

    /// Every rule, evaluated on (S, T).
    fn all_rules(p: Option<&Permissions>) -> Vec<(&'static str, Result<(), IggyError>)> {
        vec![
            ("get_streams", get_streams(p)),
            ("get_stream", get_stream(p, S)),
            ("create_stream", create_stream(p)),
            ("manage_stream", manage_stream(p, S)),
            ("get_topics", get_topics(p, S)),
            ("get_topic", get_topic(p, S, T)),
            ("create_topic", create_topic(p, S)),
            ("manage_topic", manage_topic(p, S, T)),
            ("append_messages", append_messages(p, S, T)),
            ("poll_messages", poll_messages(p, S, T)),
            ("consumer_group", consumer_group(p, S, T)),
            ("consumer_offset", consumer_offset(p, S, T)),
            ("read_users", read_users(p)),
            ("manage_users", manage_users(p)),
        ]
    }

    fn allowed_set(p: Option<&Permissions>) -> Vec<&'static str> {
        all_rules(p)
            .into_iter()
            .filter(|(_, r)| r.is_ok())
            .map(|(n, _)| n)
            .collect()
    }

    #[test]
    fn authz_model_1_no_permissions_denies_everything_with_unauthorized() {
        for p in [None, Some(&Permissions::default())] {
            for (name, r) in all_rules(p) {
                assert!(denied(r), "{name} must be Unauthorized");
            }
        }
    }

    #[test]
    fn authz_model_1_root_is_allowed_everything() {
        let root = Permissions::root();
        for (name, r) in all_rules(Some(&root)) {
            assert!(r.is_ok(), "{name} must be allowed for root");
        }
        assert!(manage_topic(Some(&root), 7, 9).is_ok());
    }

    #[test]
    fn authz_model_1_global_manage_streams_grants_all_stream_topic_and_message_rules() {
        let p = global(|g| g.manage_streams = true);
        assert_eq!(
            allowed_set(Some(&p)),
            vec![
                "get_streams",
                "get_stream",
                "create_stream",
                "manage_stream",
                "get_topics",
                "get_topic",
                "create_topic",
                "manage_topic",
                "append_messages",
                "poll_messages",
                "consumer_group",
                "consumer_offset",
            ]
        );
    }

    #[test]
    fn authz_model_1_global_read_streams_reads_and_polls_but_cannot_send_or_manage() {
        let p = global(|g| g.read_streams = true);
        assert_eq!(
            allowed_set(Some(&p)),
            vec![
                "get_streams",
                "get_stream",
                "get_topics",
                "get_topic",
                "poll_messages",
                "consumer_group",
                "consumer_offset"
            ]
        );
    }

    #[test]
    fn authz_model_1_global_manage_topics_manages_topics_and_sends_but_not_streams() {
        let p = global(|g| g.manage_topics = true);
        assert_eq!(
            allowed_set(Some(&p)),
            vec![
                "get_topics",
                "get_topic",
                "create_topic",
                "manage_topic",
                "append_messages",
                "poll_messages",
                "consumer_group",
                "consumer_offset",
            ]
        );
    }

    #[test]
    fn authz_model_1_global_read_topics_cannot_list_streams() {
        let p = global(|g| g.read_topics = true);
        assert_eq!(
            allowed_set(Some(&p)),
            vec![
                "get_topics",
                "get_topic",
                "poll_messages",
                "consumer_group",
                "consumer_offset"
            ]
        );
    }

    #[test]
    fn authz_model_1_global_poll_and_send_grant_only_messages() {
        let p = global(|g| g.poll_messages = true);
        assert_eq!(allowed_set(Some(&p)), vec!["poll_messages", "consumer_offset"]);
        let p = global(|g| g.send_messages = true);
        assert_eq!(allowed_set(Some(&p)), vec!["append_messages"]);
    }

    #[test]
    fn authz_model_1_get_streams_is_all_or_nothing_stream_grants_do_not_list() {
        let p = stream(|s| s.manage_stream = true);
        assert!(denied(get_streams(Some(&p))));
        assert!(get_stream(Some(&p), S).is_ok());
    }

    #[test]
    fn authz_model_1_stream_manage_stream_is_scoped_to_that_stream() {
        let p = stream(|s| s.manage_stream = true);
        assert_eq!(
            allowed_set(Some(&p)),
            vec![
                "get_stream",
                "manage_stream",
                "get_topics",
                "get_topic",
                "create_topic",
                "manage_topic",
                "append_messages",
                "poll_messages",
                "consumer_group",
                "consumer_offset",
            ]
        );
        assert!(denied(manage_stream(Some(&p), OTHER_S)));
        assert!(denied(get_topic(Some(&p), OTHER_S, T)));
        assert!(denied(append_messages(Some(&p), OTHER_S, T)));
    }

    #[test]
    fn authz_model_1_stream_read_stream_reads_and_polls_without_send() {
        let p = stream(|s| s.read_stream = true);
        assert_eq!(
            allowed_set(Some(&p)),
            vec![
                "get_stream",
                "get_topics",
                "get_topic",
                "poll_messages",
                "consumer_group",
                "consumer_offset"
            ]
        );
    }

    #[test]
    fn authz_model_1_stream_manage_topics_manages_topics_but_not_the_stream() {
        let p = stream(|s| s.manage_topics = true);
        assert_eq!(
            allowed_set(Some(&p)),
            vec![
                "get_topics",
                "get_topic",
                "create_topic",
                "manage_topic",
                "append_messages",
                "poll_messages",
                "consumer_group",
                "consumer_offset",
            ]
        );
    }

    #[test]
    fn authz_model_1_stream_read_topics_does_not_grant_get_stream() {
        let p = stream(|s| s.read_topics = true);
        assert!(denied(get_stream(Some(&p), S)));
        assert_eq!(
            allowed_set(Some(&p)),
            vec![
                "get_topics",
                "get_topic",
                "poll_messages",
                "consumer_group",
                "consumer_offset"
            ]
        );
    }

    #[test]
    fn authz_model_1_stream_poll_and_send_are_scoped_to_that_stream() {
        let p = stream(|s| s.poll_messages = true);
        assert_eq!(allowed_set(Some(&p)), vec!["poll_messages", "consumer_offset"]);
        assert!(poll_messages(Some(&p), S, OTHER_T).is_ok());
        assert!(denied(poll_messages(Some(&p), OTHER_S, T)));
        let p = stream(|s| s.send_messages = true);
        assert_eq!(allowed_set(Some(&p)), vec!["append_messages"]);
        assert!(denied(append_messages(Some(&p), OTHER_S, T)));
    }

    #[test]
    fn authz_model_1_topic_manage_topic_grants_read_poll_send_and_manage_of_that_topic() {
        let p = topic(|t| t.manage_topic = true);
        assert_eq!(
            allowed_set(Some(&p)),
            vec![
                "get_topic",
                "manage_topic",
                "append_messages",
                "poll_messages",
                "consumer_group",
                "consumer_offset"
            ]
        );
        assert!(denied(manage_topic(Some(&p), S, OTHER_T)));
        assert!(denied(append_messages(Some(&p), S, OTHER_T)));
    }

    #[test]
    fn authz_model_1_topic_read_implies_poll() {
        let p = topic(|t| t.read_topic = true);
        assert_eq!(
            allowed_set(Some(&p)),
            vec!["get_topic", "poll_messages", "consumer_group", "consumer_offset"]
        );
        assert!(denied(poll_messages(Some(&p), S, OTHER_T)));
    }

    #[test]
    fn authz_model_1_topic_grants_do_not_allow_get_topics_or_create_topic() {
        let p = topic(|t| {
            t.manage_topic = true;
            t.read_topic = true;
        });
        assert!(denied(get_topics(Some(&p), S)));
        assert!(denied(create_topic(Some(&p), S)));
        assert!(denied(get_stream(Some(&p), S)));
    }

    #[test]
    fn authz_model_1_topic_poll_and_send_are_message_only() {
        let p = topic(|t| t.poll_messages = true);
        assert_eq!(allowed_set(Some(&p)), vec!["poll_messages", "consumer_offset"]);
        let p = topic(|t| t.send_messages = true);
        assert_eq!(allowed_set(Some(&p)), vec!["append_messages"]);
    }

    #[test]
    fn authz_model_1_consumer_group_ops_need_read_not_poll() {
        // Polling rights alone do not allow touching consumer groups.
        let p = global(|g| {
            g.poll_messages = true;
            g.send_messages = true;
        });
        assert!(denied(consumer_group(Some(&p), S, T)));
        let p = topic(|t| t.read_topic = true);
        assert!(consumer_group(Some(&p), S, T).is_ok());
    }

    #[test]
    fn authz_model_1_users_rules() {
        let p = global(|g| g.read_users = true);
        assert_eq!(allowed_set(Some(&p)), vec!["read_users"]);
        let p = global(|g| g.manage_users = true);
        assert_eq!(allowed_set(Some(&p)), vec!["read_users", "manage_users"]);
    }
}
