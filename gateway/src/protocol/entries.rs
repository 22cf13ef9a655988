//! How many entries a decoded request carries (LIMIT-ENTRIES-1): every element of every array
//! the gateway iterates to answer it (topics, partitions, groups, members, protocols, configs).
//! Each entry can cost a backend call or a response element, so the count is what a request
//! costs, not its size in bytes.

use kafka_protocol::messages::*;

/// The entries a request carries.
pub trait Entries {
    fn entries(&self) -> usize;
}

fn nested<T>(outer: &[T], inner: impl Fn(&T) -> usize) -> usize {
    outer.len() + outer.iter().map(inner).sum::<usize>()
}

impl Entries for ApiVersionsRequest {
    fn entries(&self) -> usize {
        0
    }
}

impl Entries for InitProducerIdRequest {
    fn entries(&self) -> usize {
        0
    }
}

impl Entries for SaslHandshakeRequest {
    fn entries(&self) -> usize {
        0
    }
}

impl Entries for SaslAuthenticateRequest {
    fn entries(&self) -> usize {
        0
    }
}

impl Entries for HeartbeatRequest {
    fn entries(&self) -> usize {
        0
    }
}

/// GROUP-CONSUMER-SUBSCRIPTION-1: the subscribed topics and owned partitions are entries, bounded
/// like any request's.
impl Entries for ConsumerGroupHeartbeatRequest {
    fn entries(&self) -> usize {
        self.subscribed_topic_names.as_ref().map_or(0, Vec::len)
            + self
                .topic_partitions
                .as_deref()
                .map_or(0, |t| nested(t, |t| t.partitions.len()))
    }
}

impl Entries for ConsumerGroupDescribeRequest {
    fn entries(&self) -> usize {
        self.group_ids.len()
    }
}

impl Entries for MetadataRequest {
    fn entries(&self) -> usize {
        self.topics.as_ref().map_or(0, Vec::len)
    }
}

impl Entries for ProduceRequest {
    fn entries(&self) -> usize {
        nested(&self.topic_data, |t| t.partition_data.len())
    }
}

impl Entries for FetchRequest {
    fn entries(&self) -> usize {
        nested(&self.topics, |t| t.partitions.len()) + nested(&self.forgotten_topics_data, |t| t.partitions.len())
    }
}

impl Entries for ListOffsetsRequest {
    fn entries(&self) -> usize {
        nested(&self.topics, |t| t.partitions.len())
    }
}

impl Entries for CreateTopicsRequest {
    fn entries(&self) -> usize {
        nested(&self.topics, |t| {
            t.configs.len() + nested(&t.assignments, |a| a.broker_ids.len())
        })
    }
}

impl Entries for CreatePartitionsRequest {
    fn entries(&self) -> usize {
        nested(&self.topics, |t| {
            t.assignments.as_ref().map_or(0, |a| nested(a, |a| a.broker_ids.len()))
        })
    }
}

impl Entries for DeleteTopicsRequest {
    fn entries(&self) -> usize {
        self.topics.len() + self.topic_names.len()
    }
}

impl Entries for DescribeConfigsRequest {
    fn entries(&self) -> usize {
        nested(&self.resources, |r| r.configuration_keys.as_ref().map_or(0, Vec::len))
    }
}

impl Entries for FindCoordinatorRequest {
    fn entries(&self) -> usize {
        self.coordinator_keys.len()
    }
}

impl Entries for JoinGroupRequest {
    fn entries(&self) -> usize {
        self.protocols.len()
    }
}

impl Entries for SyncGroupRequest {
    fn entries(&self) -> usize {
        self.assignments.len()
    }
}

impl Entries for LeaveGroupRequest {
    fn entries(&self) -> usize {
        self.members.len()
    }
}

impl Entries for OffsetCommitRequest {
    fn entries(&self) -> usize {
        nested(&self.topics, |t| t.partitions.len())
    }
}

impl Entries for OffsetFetchRequest {
    fn entries(&self) -> usize {
        let topics = self
            .topics
            .as_deref()
            .map_or(0, |t| nested(t, |t| t.partition_indexes.len()));
        topics
            + nested(&self.groups, |g| {
                g.topics
                    .as_deref()
                    .map_or(0, |t| nested(t, |t| t.partition_indexes.len()))
            })
    }
}

impl Entries for DescribeGroupsRequest {
    fn entries(&self) -> usize {
        self.groups.len()
    }
}

impl Entries for ListGroupsRequest {
    fn entries(&self) -> usize {
        self.states_filter.len() + self.types_filter.len()
    }
}

impl Entries for DeleteGroupsRequest {
    fn entries(&self) -> usize {
        self.groups_names.len()
    }
}

impl Entries for OffsetDeleteRequest {
    fn entries(&self) -> usize {
        nested(&self.topics, |t| t.partitions.len())
    }
}

impl Entries for DescribeClusterRequest {
    fn entries(&self) -> usize {
        0
    }
}

impl Entries for IncrementalAlterConfigsRequest {
    fn entries(&self) -> usize {
        nested(&self.resources, |r| r.configs.len())
    }
}

impl Entries for AlterConfigsRequest {
    fn entries(&self) -> usize {
        nested(&self.resources, |r| r.configs.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};

    #[test]
    fn limit_entries_1_counts_every_topic_and_partition() {
        let topic = FetchTopic::default().with_partitions(vec![FetchPartition::default(); 3]);
        let request = FetchRequest::default().with_topics(vec![topic.clone(), topic]);
        assert_eq!(request.entries(), 2 + 6);
        assert_eq!(MetadataRequest::default().with_topics(None).entries(), 0);
    }
}
