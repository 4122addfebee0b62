//! Issue 21 over HTTP, gRPC and the CLI: times shown in a zone (`?tz=`), IDs written in a
//! friendly form (`?form=`), and a datacenter field, on the decode, make, batch and Vesta
//! routes, and the masked form (`[mask]` keys). Segment IDs with a random skip and dated
//! numbers: `tests/router/dated.rs`.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use crate::common;

use std::sync::Arc;

use axum::http::StatusCode;
use common::{get, json};
use uidgen_core::{IdForm, Layout, ManualClock, MaskKey, Masker, SnowflakeGenerator};
use uidgen_server::http::app;
use uidgen_server::service::state::AppState;

/// 2027-01-15T08:00:00Z.
const NOW_MS: u64 = 1_799_913_600_000;

/// State serving `layout` on worker 5, batches up to 1,000.
fn state_with(layout: Layout) -> Arc<AppState> {
    let clock = ManualClock::auto_advancing(NOW_MS);
    let generator = SnowflakeGenerator::new(layout, 5, clock).unwrap();
    let mut state = AppState::embedded(Arc::new(generator), 5);
    state.batch_cap = 1000;
    Arc::new(state)
}

fn router_with(layout: Layout) -> uidgen_server::http::observe::App {
    app(state_with(layout))
}

async fn post(
    router: &uidgen_server::http::observe::App,
    uri: &str,
    body: &str,
) -> (StatusCode, String) {
    common::call(router, "POST", uri, &[], body).await
}

/// The 400 `code` of an answer, asserting the status.
fn code_of(answer: &(StatusCode, String)) -> String {
    assert_eq!(answer.0, StatusCode::BAD_REQUEST, "{}", answer.1);
    json(&answer.1)["code"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn decode_shows_the_time_in_the_zone_asked_for_and_names_it() {
    let r = router_with(Layout::snowflake().unwrap());
    let (status, body) = post(
        &r,
        "/v1/ids/make",
        r#"{"timestamp":"2027-01-15T20:00:00Z","worker":7,"sequence":1}"#,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let id = json(&body)["id"].as_u64().unwrap();
    let utc = json(&body);
    assert_eq!(
        (&utc["timestamp"], &utc["zone"]),
        (&"2027-01-15T20:00:00.000Z".into(), &"UTC".into())
    );
    for (tz, timestamp, zone) in [
        (
            "Asia/Shanghai",
            "2027-01-16T04:00:00.000+08:00[Asia/Shanghai]",
            "Asia/Shanghai",
        ),
        ("%2B05:30", "2027-01-16T01:30:00.000+05:30", "+05:30"),
        ("utc", "2027-01-15T20:00:00.000Z", "UTC"),
    ] {
        let (status, body) = get(&r, &format!("/v1/ids/{id}?tz={tz}")).await;
        assert_eq!(status, StatusCode::OK, "{tz}: {body}");
        let d = json(&body);
        assert_eq!(
            (d["timestamp"].as_str(), d["zone"].as_str()),
            (Some(timestamp), Some(zone))
        );
        assert_eq!(
            d["timestamp_ms"], utc["timestamp_ms"],
            "the instant is the same"
        );
    }
    // Make shows its answer as decode does.
    let (status, body) = post(
        &r,
        "/v1/ids/make?tz=Asia/Shanghai",
        r#"{"timestamp":"2027-01-16T04:00:00+08:00","worker":7,"sequence":1}"#,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(json(&body)["id"].as_u64(), Some(id));
    assert_eq!(json(&body)["zone"], "Asia/Shanghai");
    for bad in ["Mars/Olympus", "%2B25:00", "..%2Fetc", ""] {
        let answer = get(&r, &format!("/v1/ids/{id}?tz={bad}")).await;
        assert_eq!(code_of(&answer), "invalid_parameter", "{bad}");
        assert!(answer.1.contains("`tz`"), "{}", answer.1);
    }
}

#[tokio::test]
async fn vesta_transtime_and_expid_take_a_zone() {
    let r = router_with(Layout::vesta_max_peak().unwrap());
    let (status, body) = get(&r, "/transtime?time=0&tz=Asia/Shanghai").await;
    assert_eq!(
        (status, body.as_str()),
        (
            StatusCode::OK,
            "2015-01-01T00:00:00.000+08:00[Asia/Shanghai]"
        )
    );
    let (status, body) = get(&r, "/transtime?time=0").await;
    assert_eq!(
        (status, body.as_str()),
        (StatusCode::OK, "2014-12-31T16:00:00.000Z")
    );
    let answer = get(&r, "/transtime?time=0&tz=Nowhere").await;
    assert_eq!(code_of(&answer), "invalid_parameter");
    let (_, id) = get(&r, "/genid").await;
    let (status, body) = get(&r, &format!("/expid?id={id}&tz=-03:00")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(
        json(&body)["timestamp"]
            .as_str()
            .unwrap()
            .ends_with("-03:00"),
        "{body}"
    );
}

#[tokio::test]
async fn batches_in_a_radix_form_are_fixed_width_strings_that_sort_as_the_ids_and_read_back() {
    let layout = Layout::snowflake().unwrap();
    let r = router_with(layout.clone());
    for (form, width) in [(IdForm::Base62, 11), (IdForm::Base36, 13)] {
        let (status, body) = get(&r, &format!("/v1/ids?count=50&form={form}")).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let texts: Vec<String> = json(&body)["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap().to_owned())
            .collect();
        assert_eq!(texts.len(), 50);
        assert!(texts.iter().all(|t| t.len() == width), "{texts:?}");
        let ids: Vec<u64> = texts
            .iter()
            .map(|t| layout.decode_form(t, form).unwrap().id)
            .collect();
        let mut sorted_texts = texts.clone();
        sorted_texts.sort();
        let mut sorted_ids = ids.clone();
        sorted_ids.sort_unstable();
        sorted_ids.dedup();
        assert_eq!(sorted_ids.len(), 50, "no duplicates");
        let resorted: Vec<u64> = sorted_texts
            .iter()
            .map(|t| layout.decode_form(t, form).unwrap().id)
            .collect();
        assert_eq!(resorted, sorted_ids, "the texts sort as the IDs do");
        // Decode reads the text back with `form`, and answers it as `text`.
        let (status, body) = get(&r, &format!("/v1/ids/{}?form={form}", texts[0])).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let d = json(&body);
        assert_eq!(
            (d["id"].as_u64(), d["text"].as_str()),
            (Some(ids[0]), Some(texts[0].as_str()))
        );
        assert_eq!(d["worker"], 5);
        // Without `form` the text is not guessed at.
        let answer = get(&r, &format!("/v1/ids/{}", texts[0])).await;
        assert_eq!(code_of(&answer), "malformed_id");
    }
    // The decimal form: the same numbers, as strings (exact in JavaScript).
    let (status, body) = get(&r, "/v1/ids?count=2&form=decimal").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let texts = json(&body)["ids"].clone();
    assert!(texts[0].as_str().unwrap().parse::<u64>().is_ok(), "{body}");
    // Without `form`, numbers as always.
    let (_, body) = get(&r, "/v1/ids?count=2").await;
    assert!(json(&body)["ids"][0].is_u64(), "{body}");
    for (bad, want) in [
        ("/v1/ids?form=base64", "invalid_parameter"),
        ("/v1/ids/1?form=hex", "invalid_parameter"),
        ("/v1/ids/1TCKi1nFuN?form=base62", "malformed_id"), // one digit short
        ("/v1/ids/1TCKi1nFu-h?form=base62", "malformed_id"),
        ("/v1/ids/zzzzzzzzzzzzz?form=base36", "malformed_id"), // past 2^64
    ] {
        let answer = get(&r, bad).await;
        assert_eq!(code_of(&answer), want, "{bad}: {}", answer.1);
    }
    // A narrow layout writes narrower texts.
    let js = router_with(Layout::safe_js().unwrap());
    let (_, body) = get(&js, "/v1/ids?form=base62").await;
    assert_eq!(json(&body)["ids"][0].as_str().unwrap().len(), 9, "{body}");
}

#[tokio::test]
async fn a_datacenter_field_is_stamped_decoded_and_made_by_id() {
    let layout = Layout::snowflake()
        .unwrap()
        .with_datacenter_bits(5)
        .unwrap()
        .with_datacenter_id(3)
        .unwrap();
    let r = router_with(layout.clone());
    let (_, body) = get(&r, "/v1/ids").await;
    let id = json(&body)["ids"][0].as_u64().unwrap();
    let (status, body) = get(&r, &format!("/v1/ids/{id}")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let d = json(&body);
    assert_eq!(
        (d["datacenter"].as_u64(), d["worker"].as_u64()),
        (Some(3), Some(5))
    );
    // Make: the served datacenter by default, another by id.
    let (status, body) = post(&r, "/v1/ids/make", r#"{"time":1,"worker":31,"sequence":0}"#).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(json(&body)["datacenter"], 3);
    let (status, body) = post(
        &r,
        "/v1/ids/make",
        r#"{"time":1,"worker":31,"sequence":0,"datacenter":30}"#,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let made = json(&body);
    assert_eq!(made["datacenter"], 30);
    let id = made["id"].as_u64().unwrap();
    assert_eq!(layout.decode(id).unwrap().datacenter, Some(30));
    // Too wide a datacenter or worker: each named.
    let answer = post(
        &r,
        "/v1/ids/make",
        r#"{"time":1,"worker":32,"sequence":0,"datacenter":32}"#,
    )
    .await;
    assert_eq!(code_of(&answer), "invalid_parameter");
    let fields = json(&answer.1)["fields"].clone();
    assert!(
        fields["datacenter"].is_string() && fields["worker"].is_string(),
        "{}",
        answer.1
    );
    // A layout without the field shows none, and refuses one made with it.
    let plain = router_with(Layout::snowflake().unwrap());
    let (_, body) = get(&plain, &format!("/v1/ids/{id}")).await;
    assert!(json(&body).get("datacenter").is_none(), "{body}");
    let answer = post(
        &plain,
        "/v1/ids/make",
        r#"{"time":1,"worker":1,"sequence":0,"datacenter":1}"#,
    )
    .await;
    assert!(
        json(&answer.1)["fields"]["datacenter"].is_string(),
        "{}",
        answer.1
    );
}

#[tokio::test]
async fn grpc_make_id_takes_a_datacenter_and_explain_id_names_it() {
    use tonic::Request;
    use uidgen_proto::v1::id_service_server::IdService;
    use uidgen_proto::v1::{ExplainIdRequest, MakeIdRequest};

    let service = |layout: Layout| {
        let (_stop, stopping) = tokio::sync::watch::channel(false);
        uidgen_server::grpc::GrpcService::new(state_with(layout), 1000, stopping)
    };
    let twitter = Layout::snowflake()
        .unwrap()
        .with_datacenter_bits(5)
        .unwrap()
        .with_datacenter_id(3)
        .unwrap();
    let grpc = service(twitter.clone());
    let field = |fields: &[uidgen_proto::v1::Field], name: &str| {
        fields.iter().find(|f| f.name == name).map(|f| f.value)
    };
    for (asked, stamped) in [(None, 3), (Some(30), 30)] {
        let made = grpc
            .make_id(Request::new(MakeIdRequest {
                time: Some(1),
                worker: 31,
                sequence: 2,
                datacenter: asked,
                ..MakeIdRequest::default()
            }))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(field(&made.fields, "datacenter"), Some(stamped));
        assert_eq!(twitter.decode(made.id).unwrap().datacenter, Some(stamped));
        let explained = grpc
            .explain_id(Request::new(ExplainIdRequest {
                id: made.id.to_string(),
                ..Default::default()
            }))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(field(&explained.fields, "datacenter"), Some(stamped));
    }
    let too_wide = grpc
        .make_id(Request::new(MakeIdRequest {
            time: Some(1),
            datacenter: Some(32),
            ..MakeIdRequest::default()
        }))
        .await
        .unwrap_err();
    assert_eq!(too_wide.code(), tonic::Code::InvalidArgument);
    assert!(
        too_wide.message().contains("`datacenter`: "),
        "{}",
        too_wide.message()
    );
    let plain = service(Layout::snowflake().unwrap());
    let refused = plain
        .make_id(Request::new(MakeIdRequest {
            time: Some(1),
            datacenter: Some(1),
            ..MakeIdRequest::default()
        }))
        .await
        .unwrap_err();
    assert!(
        refused.message().contains("`datacenter`: "),
        "{}",
        refused.message()
    );
}

const KEY_1: &str = "8f4e1c2a9b7d6e5f0a1b2c3d4e5f6a7b";
const KEY_2: &str = "00112233445566778899aabbccddeeff";

/// State masking with key 2, still reading key 1's texts (a rotation under way).
fn masking_state(layout: Layout) -> Arc<AppState> {
    let keys = vec![
        MaskKey::from_hex(1, KEY_1).unwrap(),
        MaskKey::from_hex(2, KEY_2).unwrap(),
    ];
    let mut state = Arc::into_inner(state_with(layout)).unwrap();
    state.masker = Some(Arc::new(Masker::new(keys, 2).unwrap()));
    Arc::new(state)
}

fn masking_router(layout: Layout) -> uidgen_server::http::observe::App {
    app(masking_state(layout))
}

fn texts_of(body: &str) -> Vec<String> {
    json(body)["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn masked_batches_hide_the_order_and_read_back_on_every_route() {
    let layout = Layout::snowflake().unwrap();
    let r = masking_router(layout.clone());
    let (status, body) = get(&r, "/v1/ids?count=1000&form=masked").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let texts = texts_of(&body);
    assert_eq!(texts.len(), 1000);
    assert!(
        texts
            .iter()
            .all(|t| t.starts_with("2_") && t.len() == 2 + 11),
        "{:?}",
        &texts[..3]
    );
    // Each reads back (decode answers the same text), and the IDs behind them are the
    // generator's: distinct, worker 5, consecutive in issue order.
    let mut ids = Vec::new();
    for text in &texts {
        let (status, body) = get(&r, &format!("/v1/ids/{text}?form=masked")).await;
        assert_eq!(status, StatusCode::OK, "{text}: {body}");
        let d = json(&body);
        assert_eq!(d["text"].as_str(), Some(text.as_str()));
        assert_eq!(d["worker"], 5);
        ids.push(d["id"].as_u64().unwrap());
    }
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "issued in order");
    let mut sorted = texts.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), 1000, "no two IDs mask alike");
    // The order is gone: about as many steps fall as rise.
    let rises = texts.windows(2).filter(|w| w[0] < w[1]).count();
    assert!(
        (350..=650).contains(&rises),
        "{rises} of 999 masked steps rise"
    );
    // A space's batch masks with the same keys.
    let (status, body) = get(&r, "/v1/spaces/default/ids?count=3&form=masked").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let space_text = &texts_of(&body)[0];
    let (status, body) = get(
        &r,
        &format!("/v1/spaces/default/ids/{space_text}?form=masked"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // Make answers its ID masked when asked.
    let (status, body) = post(
        &r,
        "/v1/ids/make?form=masked",
        r#"{"timestamp":"2027-01-15T20:00:00Z","worker":7,"sequence":1}"#,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let made = json(&body);
    let text = made["text"].as_str().unwrap();
    let (_, body) = get(&r, &format!("/v1/ids/{text}?form=masked")).await;
    assert_eq!(json(&body)["id"], made["id"]);
    assert_eq!(json(&body)["worker"], 7);
}

#[tokio::test]
async fn a_rotated_key_still_reads_and_an_unknown_one_is_a_malformed_id() {
    let layout = Layout::snowflake().unwrap();
    let r = masking_router(layout.clone());
    let id = layout.compose(&layout.parts(1_000, 9, 4)).unwrap();
    let old = Masker::new(vec![MaskKey::from_hex(1, KEY_1).unwrap()], 1)
        .unwrap()
        .mask(&layout, id)
        .unwrap();
    let (status, body) = get(&r, &format!("/v1/ids/{old}?form=masked")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(json(&body)["id"].as_u64(), Some(id));
    // Answered with the current key: the same ID, key 2's text.
    assert!(
        json(&body)["text"].as_str().unwrap().starts_with("2_"),
        "{body}"
    );
    let digits = old.split_once('_').unwrap().1;
    for bad in [
        format!("/v1/ids/7_{digits}?form=masked"),
        format!("/v1/ids/1_{digits}0?form=masked"),
        format!("/v1/ids/{digits}?form=masked"),
        format!("/v1/ids/{id}?form=masked"),
    ] {
        let answer = get(&r, &bad).await;
        assert_eq!(code_of(&answer), "malformed_id", "{bad}: {}", answer.1);
    }
    // The plain forms are untouched.
    let (status, _) = get(&r, &format!("/v1/ids/{id}")).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn grpc_writes_texts_in_any_form_and_explains_them_back() {
    use tonic::{Code, Request};
    use uidgen_proto::v1::id_service_server::IdService;
    use uidgen_proto::v1::{ExplainIdRequest, NextIdTextsRequest};

    let layout = Layout::snowflake().unwrap();
    let service = |state| {
        let (_stop, stopping) = tokio::sync::watch::channel(false);
        uidgen_server::grpc::GrpcService::new(state, 1000, stopping)
    };
    let grpc = service(masking_state(layout.clone()));
    let texts = |form: &str, count: u32| {
        let request = NextIdTextsRequest {
            count,
            form: form.to_owned(),
            ..Default::default()
        };
        let grpc = grpc.clone();
        async move { grpc.next_id_texts(Request::new(request)).await }
    };
    let masked = texts("masked", 200).await.unwrap().into_inner().texts;
    assert_eq!(masked.len(), 200);
    let mut ids = std::collections::BTreeSet::new();
    for text in &masked {
        assert!(text.starts_with("2_"), "{text}");
        let explained = grpc
            .explain_id(Request::new(ExplainIdRequest {
                id: text.clone(),
                form: "masked".into(),
                ..Default::default()
            }))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(&explained.text, text);
        assert_eq!(
            explained
                .fields
                .iter()
                .find(|f| f.name == "worker")
                .unwrap()
                .value,
            5
        );
        assert!(ids.insert(explained.id), "{} twice", explained.id);
    }
    // The radix forms come fixed width and in issue order, which is the IDs' order; an empty
    // form is decimal.
    let base62 = texts("base62", 50).await.unwrap().into_inner().texts;
    assert!(
        base62.windows(2).all(|w| w[0] < w[1] && w[0].len() == 11),
        "{base62:?}"
    );
    let decimal = texts("", 3).await.unwrap().into_inner().texts;
    assert!(
        decimal.iter().all(|t| t.parse::<u64>().is_ok()),
        "{decimal:?}"
    );
    // A plain explain answers no text, as before the form existed.
    let plain = grpc
        .explain_id(Request::new(ExplainIdRequest {
            id: decimal[0].clone(),
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(plain.text, "");
    for (form, count, why) in [
        ("hex", 1, "unknown ID form"),
        ("masked", 0, "out of range"),
        ("masked", 1001, "out of range"),
        ("decimal", 200_000, "4 MiB"),
    ] {
        let status = texts(form, count).await.unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{form} {count}");
        assert!(
            status.message().contains(why),
            "{form} {count}: {}",
            status.message()
        );
    }
    // Without keys, masked is refused on both methods, naming the setting.
    let keyless = service(state_with(layout));
    let status = keyless
        .next_id_texts(Request::new(NextIdTextsRequest {
            count: 1,
            form: "masked".into(),
            ..Default::default()
        }))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(
        status.message().contains("mask.keys"),
        "{}",
        status.message()
    );
    let status = keyless
        .explain_id(Request::new(ExplainIdRequest {
            id: masked[0].clone(),
            form: "masked".into(),
            ..Default::default()
        }))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
}

#[tokio::test]
async fn without_keys_the_masked_form_is_refused_and_not_offered() {
    let plain = router_with(Layout::snowflake().unwrap());
    for uri in ["/v1/ids?form=masked", "/v1/ids/1_00000000000?form=masked"] {
        let answer = get(&plain, uri).await;
        assert_eq!(code_of(&answer), "invalid_parameter", "{uri}");
        assert!(answer.1.contains("mask.keys"), "{}", answer.1);
    }
    let form_enum = |doc: &serde_json::Value| {
        doc["paths"]["/v1/ids"]["get"]["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "form")
            .unwrap()["schema"]["enum"]
            .clone()
    };
    let (_, body) = get(&plain, "/openapi.json").await;
    assert_eq!(
        form_enum(&json(&body)),
        serde_json::json!(["decimal", "base36", "base62"])
    );
    let masking = masking_router(Layout::snowflake().unwrap());
    let (_, body) = get(&masking, "/openapi.json").await;
    let doc = json(&body);
    assert_eq!(
        form_enum(&doc),
        serde_json::json!(["decimal", "base36", "base62", "masked"])
    );
    // The document's pattern for a path ID takes the masked texts the server writes.
    let id_schema = &doc["paths"]["/v1/ids/{id}"]["get"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "id")
        .unwrap()["schema"];
    let masked = &id_schema["oneOf"][2];
    let pattern = regex::Regex::new(masked["pattern"].as_str().unwrap()).unwrap();
    let (_, body) = get(&masking, "/v1/ids?count=20&form=masked").await;
    for text in texts_of(&body) {
        assert!(pattern.is_match(&text), "{text}");
        assert!(text.len() <= usize::try_from(masked["maxLength"].as_u64().unwrap()).unwrap());
    }
}

#[tokio::test]
async fn every_zone_the_document_allows_is_one_the_routes_take() {
    let r = router_with(Layout::snowflake().unwrap());
    let (_, body) = get(&r, "/openapi.json").await;
    let doc = json(&body);
    let params = doc["paths"]["/transtime"]["get"]["parameters"]
        .as_array()
        .unwrap();
    let tz = &params.iter().find(|p| p["name"] == "tz").unwrap()["schema"];
    let names = tz["oneOf"][0]["enum"].as_array().unwrap();
    assert!(names.len() > 300, "{} names", names.len());
    assert_eq!(names[0], "UTC");
    for name in names {
        let name = name.as_str().unwrap();
        assert!(uidgen_core::Zone::parse(name).is_ok(), "{name}");
    }
    let offset = regex::Regex::new(tz["oneOf"][1]["pattern"].as_str().unwrap()).unwrap();
    for sign in ['+', '-'] {
        for h in 0..=24 {
            for m in 0..=60 {
                for text in [
                    format!("{sign}{h:02}:{m:02}"),
                    format!("{sign}{h:02}{m:02}"),
                    format!("{sign}{h:02}"),
                ] {
                    if offset.is_match(&text) {
                        assert!(uidgen_core::Zone::parse(&text).is_ok(), "{text}");
                    }
                }
            }
        }
    }
    assert!(offset.is_match("+08:00") && offset.is_match("-0530") && offset.is_match("+18"));
    // And the route takes one of each.
    for tz in ["UTC", "Asia/Shanghai", "%2B05:45", "-03"] {
        let (status, body) = get(&r, &format!("/transtime?time=1&tz={tz}")).await;
        assert_eq!(status, StatusCode::OK, "{tz}: {body}");
    }
}

#[test]
fn the_cli_makes_and_decodes_a_datacenter_by_name() {
    let env = [
        ("UIDGEN_LAYOUT", "snowflake"),
        ("UIDGEN_LAYOUT_DATACENTER_BITS", "5"),
        ("UIDGEN_LAYOUT_DATACENTER_ID", "3"),
    ];
    let made = |extra: &[&str]| {
        let mut args = vec!["make", "--units", "1", "--worker", "7", "--seq", "2"];
        args.extend_from_slice(extra);
        let (status, out, err) = common::run(&args, &env);
        assert!(status.success(), "{err}");
        out.trim().to_owned()
    };
    for (extra, datacenter) in [(&[][..], "3"), (&["--datacenter", "30"][..], "30")] {
        let id = made(extra);
        let (status, out, err) = common::run(&["decode", &id], &env);
        assert!(status.success(), "{err}");
        assert!(
            out.contains(&format!(" datacenter={datacenter} worker=7 ")),
            "{out}"
        );
    }
    let (status, _, err) = common::run(
        &[
            "make",
            "--units",
            "1",
            "--worker",
            "7",
            "--seq",
            "2",
            "--datacenter",
            "32",
        ],
        &env,
    );
    assert!(!status.success());
    assert!(err.contains("datacenter"), "{err}");
}
