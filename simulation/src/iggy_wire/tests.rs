//! The simulated Iggy wire's tests: round trips, errors kept apart, and frames and counts refused before they allocate.

use super::*;

fn message(offset: u64, payload: &'static [u8], headers: Option<&'static [u8]>) -> IggyMessage {
    IggyMessage {
        header: IggyMessageHeader {
            checksum: 7,
            id: u128::MAX - 3,
            offset,
            timestamp: 1_700_000_000_000_000,
            origin_timestamp: 1_699_999_999_000_000,
            user_headers_length: headers.map_or(0, |h| h.len() as u32),
            payload_length: payload.len() as u32,
            reserved: 0,
        },
        payload: Bytes::from_static(payload),
        user_headers: headers.map(Bytes::from_static),
    }
}

fn one_frame(frame: Bytes) -> Bytes {
    let mut buffer = BytesMut::from(&frame[..]);
    let body = take_frame(&mut buffer).unwrap().expect("a whole frame");
    assert!(buffer.is_empty());
    body
}

#[test]
fn a_request_round_trips_with_its_messages() {
    let request = Request {
        id: 42,
        user: 3,
        op: Op::Append {
            stream: "kafka".into(),
            topic: "t".into(),
            partition: 2,
            messages: vec![message(0, b"a", None), message(1, b"bc", Some(b"hh"))],
        },
    };
    let decoded = decode_request(one_frame(encode_request(&request))).unwrap();
    assert_eq!(decoded, request);
}

#[test]
fn errors_keep_the_variants_the_gateway_tells_apart() {
    let errors: Vec<BackendError> = vec![
        BackendError::TooManyConsumerOffsets,
        IggyError::ResourceNotFound("member 4".into()).into(),
        IggyError::ConsumerGroupNameAlreadyExists("kafka.cg.g".into(), ident("t")).into(),
        IggyError::ConsumerGroupIdNotFound(ident("g"), ident("t")).into(),
        IggyError::ConsumerOffsetNotFound(3).into(),
        IggyError::Unauthorized.into(),
        IggyError::InvalidOffset(9).into(),
    ];
    for e in errors {
        let response = Response {
            id: 1,
            outcome: Outcome::Failed(e.clone()),
        };
        let decoded = decode_response(one_frame(encode_response(&response))).unwrap();
        let Outcome::Failed(back) = decoded.outcome else {
            panic!("{e}: not a failure")
        };
        assert_eq!(back.to_string(), e.to_string());
    }
}

#[test]
fn a_frame_above_the_limit_is_refused_before_its_body_arrives() {
    let mut buffer = BytesMut::new();
    buffer.put_u32(MAX_FRAME_BYTES as u32 + 1);
    assert_eq!(
        take_frame(&mut buffer),
        Err(WireError::FrameTooLarge(MAX_FRAME_BYTES + 1))
    );
}

#[test]
fn a_count_larger_than_the_frame_is_refused_without_allocating() {
    let mut body = BytesMut::new();
    body.put_u64(1);
    body.put_u8(5);
    body.put_u32(u32::MAX);
    assert_eq!(
        decode_response(body.freeze()).unwrap_err(),
        WireError::Truncated("messages")
    );
}

#[test]
fn a_partial_frame_waits_and_trailing_bytes_are_refused() {
    let frame = encode_request(&Request {
        id: 1,
        user: 0,
        op: Op::AppendGeneration,
    });
    let mut buffer = BytesMut::from(&frame[..frame.len() - 1]);
    assert_eq!(take_frame(&mut buffer), Ok(None));
    let mut body = BytesMut::from(&one_frame(frame)[..]);
    body.put_u8(0);
    assert_eq!(decode_request(body.freeze()), Err(WireError::TrailingBytes(1)));
}
