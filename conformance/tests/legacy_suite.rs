//! The old-version cases (`cases::legacy_cases`) against an in-process gateway on the embedded
//! backend.

mod common;

suite!(legacy_cases;
    offset_commit_v0_and_v1_share_one_store_with_every_offset_fetch_version,
    offset_commit_v1_checks_the_member_and_generation,
    list_offsets_v0_answers_old_style_offsets,
    create_topics_v0_creates_and_v1_validates,
    delete_topics_v0_deletes_a_topic,
    describe_configs_v0_says_which_values_are_defaults,
);
