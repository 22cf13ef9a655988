//! The old-version cases (`cases::legacy_cases`) against an in-process gateway on the embedded
//! backend.

mod common;

suite!(legacy_cases;
    legacy_offset_commit_v0_and_v1_share_one_store_with_every_offset_fetch_version,
    legacy_offset_commit_v1_checks_the_member_and_generation,
    legacy_list_offsets_v0_answers_old_style_offsets,
    legacy_create_topics_v0_creates_and_v1_validates,
    legacy_delete_topics_v0_deletes_a_topic,
    legacy_describe_configs_v0_says_which_values_are_defaults,
);
