//! `GET /openapi.json` against the router it describes: every described operation is served,
//! every route is described, and the described error body is what errors really look like.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use crate::common;

use std::sync::Arc;

use axum::http::StatusCode;
use common::{call, get, json};
use serde_json::Value;
use uidgen_core::{DefaultUidGenerator, Layout, SystemClock};
use uidgen_server::http::app;
use uidgen_server::service::state::AppState;

fn router() -> uidgen_server::http::observe::App {
    // Fields of the make body are bounded by this layout: 2024 as epoch keeps its range past now.
    let layout = Layout::baidu("2024-01-01").unwrap();
    let generator = DefaultUidGenerator::new(layout, 5, SystemClock).unwrap();
    app(Arc::new(AppState::embedded(Arc::new(generator), 5)))
}

async fn document(r: &uidgen_server::http::observe::App) -> Value {
    let (status, body) = get(r, "/openapi.json").await;
    assert_eq!(status, StatusCode::OK);
    json(&body)
}

/// A concrete path for a described one: each `{param}` filled with a value of its kind.
fn concrete(path: &str) -> String {
    path.replace("{id}", "1")
        .replace("{key}", "k")
        .replace("{tag}", "t")
        .replace("{app_id}", "1")
        .replace("{worker_id}", "1")
        .replace("{space}", "default")
        .replace("{text}", "20261125-000001")
}

#[tokio::test]
async fn every_described_operation_is_served() {
    let r = router();
    let doc = document(&r).await;
    assert_eq!(doc["openapi"], "3.1.0");
    let paths = doc["paths"].as_object().unwrap();
    let mut operations = 0;
    for (path, item) in paths {
        assert!(
            !concrete(path).contains('{'),
            "{path}: a path parameter the test cannot fill"
        );
        for method in item.as_object().unwrap().keys() {
            let uri = concrete(path);
            let (status, body) = call(&r, &method.to_uppercase(), &uri, &[], "{}").await;
            // The router's own fallbacks: no route for the path, or none for the method. A
            // route may answer 404 for its own reasons (a mode that is off), with its own code.
            let fallback = ["\"code\":\"not_found\"", "\"code\":\"method_not_allowed\""];
            assert!(
                !fallback.iter().any(|f| body.contains(f)),
                "{method} {path} is described but not served: {status} {body}"
            );
            operations += 1;
        }
    }
    assert!(operations >= 26, "only {operations} operations described");
}

#[tokio::test]
async fn the_routing_table_has_no_way_in_but_described_routes() {
    // `add(operation, handler)` adds a route by its description; `route`, `route_service`,
    // `nest` and `nest_service` would add one without. The table must not use them.
    let table = include_str!("../../src/http/mod.rs");
    for undescribed in [".route(", ".route_service(", ".nest(", ".nest_service("] {
        assert!(
            !table.contains(undescribed),
            "src/http/mod.rs adds a route with `{undescribed}`: describe it in \
             src/http/paths.json and add it with `.add(operation_id, handler)` instead, so \
             /openapi.json describes it"
        );
    }
    // The router's routes can only come from `app`, and `app` only from `routes`.
    assert!(table.contains("routes(&source, &state, &mut gates, extra).into_parts()"));
}

/// Every `$ref` in `value`, at any depth.
fn refs<'v>(value: &'v Value, out: &mut Vec<&'v str>) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(target)) = map.get("$ref") {
                out.push(target);
            }
            map.values().for_each(|v| refs(v, out));
        }
        Value::Array(items) => items.iter().for_each(|v| refs(v, out)),
        _ => {}
    }
}

#[tokio::test]
async fn every_schema_named_is_in_the_document_and_every_schema_is_named() {
    // The paths are checked in and the schemas derived from types: a path naming a schema that
    // no listed type gives, or a type listed for no path, is a slip between the two.
    let doc = document(&router()).await;
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    let mut named = Vec::new();
    refs(&doc, &mut named);
    for target in &named {
        let name = target.strip_prefix("#/components/schemas/").unwrap();
        assert!(
            schemas.contains_key(name),
            "{target} is not in the document"
        );
    }
    // utoipa writes a generic's argument into the generic's schema
    // (`TinyidResponse_TinyidSegment`'s `data`), and the document has always shown Tinyid's
    // segment on its own as well, for a client generator to name.
    for name in schemas.keys().filter(|name| *name != "TinyidSegment") {
        let target = format!("#/components/schemas/{name}");
        assert!(
            named.contains(&target.as_str()),
            "schema {name} is named by nothing"
        );
    }
}

#[tokio::test]
async fn operation_ids_are_unique_and_every_operation_names_its_responses() {
    let doc = document(&router()).await;
    let mut seen = std::collections::HashSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let id = op["operationId"].as_str().unwrap();
            assert!(seen.insert(id.to_owned()), "operationId {id} is used twice");
            let responses = op["responses"].as_object().unwrap();
            assert!(responses.contains_key("200"), "{method} {path}: no 200");
            // Every JSON error response points at the one Error schema.
            for (status, response) in responses {
                if status.starts_with('2') {
                    continue;
                }
                if let Some(schema) = response["content"]["application/json"]["schema"].get("$ref")
                {
                    assert_eq!(
                        schema, "#/components/schemas/Error",
                        "{method} {path} {status}"
                    );
                }
            }
        }
    }
}

/// Check a JSON value against a (small) JSON schema: its type, its required properties, and
/// no property the schema does not name.
fn conforms(value: &Value, schema: &Value, what: &str) {
    let types: Vec<&str> = match &schema["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().map(|t| t.as_str().unwrap()).collect(),
        other => panic!("{what}: schema without a type: {other}"),
    };
    let kind = match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_u64() || n.is_i64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    assert!(
        types.contains(&kind) || (kind == "integer" && types.contains(&"number")),
        "{what}: {kind} where the schema says {types:?}"
    );
    let Value::Object(object) = value else {
        return;
    };
    for required in schema["required"].as_array().into_iter().flatten() {
        let name = required.as_str().unwrap();
        assert!(object.contains_key(name), "{what}: lacks required `{name}`");
    }
    let properties = schema["properties"].as_object();
    for (name, field) in object {
        match (
            properties.and_then(|p| p.get(name)),
            schema.get("additionalProperties"),
        ) {
            (Some(sub), _) => conforms(field, sub, &format!("{what}.{name}")),
            (None, Some(extra)) if extra.is_object() => {
                conforms(field, extra, &format!("{what}.{name}"))
            }
            _ => panic!("{what}: property `{name}` is not in the schema"),
        }
    }
}

#[tokio::test]
async fn the_described_error_body_is_what_real_errors_carry() {
    let r = router();
    let doc = document(&r).await;
    let schema = &doc["components"]["schemas"]["Error"];
    let required: Vec<&str> = schema["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(required, ["code", "message"]);
    let cases = [
        ("GET", "/v1/ids/12x", "", StatusCode::BAD_REQUEST),
        (
            "POST",
            "/v1/ids/make",
            r#"{"time":1,"worker":99999999,"sequence":99999}"#,
            StatusCode::BAD_REQUEST,
        ),
        ("GET", "/no/such/route", "", StatusCode::NOT_FOUND),
        ("GET", "/v1/segments", "", StatusCode::NOT_FOUND),
        ("DELETE", "/v1/ids", "", StatusCode::METHOD_NOT_ALLOWED),
        // No credentials: 401 first, even with the admin API off.
        (
            "PUT",
            "/v1/admin/segments/t",
            "{}",
            StatusCode::UNAUTHORIZED,
        ),
    ];
    for (method, uri, body, expected) in cases {
        let (status, text) = call(&r, method, uri, &[], body).await;
        assert_eq!(status, expected, "{method} {uri}: {text}");
        let error = json(&text);
        conforms(&error, schema, &format!("{method} {uri}"));
        // And the operation that answered describes this status with that schema.
        let path = if uri == "/v1/ids/12x" {
            "/v1/ids/{id}"
        } else {
            uri
        };
        if let Some(op) = doc["paths"][path].get(method.to_lowercase()) {
            assert_eq!(
                op["responses"][status.as_str()]["content"]["application/json"]["schema"]["$ref"],
                "#/components/schemas/Error",
                "{method} {path} does not describe its {status}"
            );
        }
    }
    // The make route names each bad field, as the schema's `fields` says.
    let (_, text) = call(
        &r,
        "POST",
        "/v1/ids/make",
        &[],
        r#"{"time":1,"worker":99999999,"sequence":99999}"#,
    )
    .await;
    let error = json(&text);
    let fields = error["fields"].as_object().unwrap();
    assert_eq!(
        fields.keys().collect::<Vec<_>>(),
        ["sequence", "worker"],
        "{text}"
    );
}

/// A router of `layout` with `batch_cap`.
fn router_with(layout: Layout, batch_cap: usize) -> uidgen_server::http::observe::App {
    let generator = DefaultUidGenerator::new(layout, 1, SystemClock).unwrap();
    let mut state = AppState::embedded(Arc::new(generator), 1);
    state.batch_cap = batch_cap;
    app(Arc::new(state))
}

/// The schema of each property of a body, with `$ref`s resolved.
fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    match schema["$ref"].as_str() {
        Some(reference) => doc
            .pointer(reference.trim_start_matches('#'))
            .unwrap_or_else(|| panic!("dangling {reference}")),
        None => schema,
    }
}

/// The types a schema allows, through `type` (one or several) and `oneOf`.
fn types_of(schema: &Value) -> Vec<(String, &Value)> {
    let mut out = Vec::new();
    match &schema["type"] {
        Value::String(t) => out.push((t.clone(), schema)),
        Value::Array(ts) => out.extend(ts.iter().map(|t| (t.as_str().unwrap().to_owned(), schema))),
        _ => {}
    }
    for choice in schema["oneOf"].as_array().into_iter().flatten() {
        out.extend(types_of(choice));
    }
    out
}

/// Why `schema` (of `what`) leaves a value unbounded that the server would refuse, if it does.
fn unbounded(schema: &Value, body: bool) -> Option<String> {
    let kinds = types_of(schema);
    if kinds.is_empty() && schema.get("enum").is_none() {
        return Some(format!("no type: {schema}"));
    }
    for (kind, part) in kinds {
        match kind.as_str() {
            "integer" | "number"
                if part.get("minimum").is_none() || part.get("maximum").is_none() =>
            {
                return Some(format!("an integer without minimum and maximum: {part}"));
            }
            // A parameter must not be empty (an empty path segment or `?id=` is refused); a
            // body's text must have a length the store can keep.
            "string" if part.get("enum").is_none() => {
                if !body && part["minLength"].as_u64().unwrap_or(0) < 1 {
                    return Some(format!("a string parameter that may be empty: {part}"));
                }
                if body && part.get("maxLength").is_none() {
                    return Some(format!("a string field without maxLength: {part}"));
                }
            }
            _ => {}
        }
    }
    None
}

#[tokio::test]
async fn every_parameter_and_body_field_states_its_bounds() {
    // Any route, today's or one added later, is held to this: a fuzzer (schemathesis, in CI)
    // reads these bounds and must not be able to build a request the server refuses.
    let doc = document(&router()).await;
    let mut checked = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            for param in op["parameters"].as_array().into_iter().flatten() {
                let name = &param["name"];
                if let Some(why) = unbounded(&param["schema"], false) {
                    panic!(
                        "{method} {path}, parameter {name}: {why}; add its rule to src/http/bounds.rs"
                    );
                }
                checked += 1;
            }
            let Some(body) = op["requestBody"]["content"]["application/json"].get("schema") else {
                continue;
            };
            let body = resolve(&doc, body);
            assert_eq!(
                body["additionalProperties"], false,
                "{method} {path}: body takes unknown fields"
            );
            for (field, schema) in body["properties"].as_object().unwrap() {
                if let Some(why) = unbounded(resolve(&doc, schema), true) {
                    panic!(
                        "{method} {path}, body field `{field}`: {why}; add its rule to src/http/bounds.rs"
                    );
                }
                checked += 1;
            }
        }
    }
    assert!(checked >= 30, "only {checked} parameters and fields");
}

#[tokio::test]
async fn bounds_that_come_from_the_configuration_are_the_servers() {
    let param = |doc: &Value, path: &str, name: &str| -> Option<Value> {
        let op = doc["paths"][path]
            .as_object()
            .unwrap()
            .values()
            .next()
            .unwrap()
            .clone();
        op["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .map(|p| p["schema"].clone())
    };
    let baidu = document(&router_with(Layout::baidu("2024-01-01").unwrap(), 777)).await;
    assert_eq!(param(&baidu, "/v1/ids", "count").unwrap()["maximum"], 777);
    assert_eq!(
        param(&baidu, "/v1/segments/{tag}", "count").unwrap()["maximum"],
        777
    );
    assert_eq!(
        param(&baidu, "/v1/segments/{tag}/lease", "size").unwrap()["maximum"],
        1_000_000
    );
    assert_eq!(param(&baidu, "/makeid", "seq").unwrap()["maximum"], 8191);
    assert_eq!(
        param(&baidu, "/makeid", "machine").unwrap()["maximum"],
        4_194_303
    );
    assert_eq!(
        param(&baidu, "/makeid", "version").unwrap()["maximum"],
        0,
        "baidu has no version bits"
    );
    assert_eq!(
        param(&baidu, "/transtime", "time").unwrap()["maximum"],
        (1u64 << 28) - 1
    );
    assert_eq!(param(&baidu, "/expid", "id").unwrap()["maximum"], i64::MAX);
    assert!(
        param(&baidu, "/makeid", "process").is_none(),
        "baidu does not split its worker"
    );
    let layouts = param(&baidu, "/v1/ids/{id}", "layout").unwrap();
    assert_eq!(layouts["enum"][0], "baidu");
    assert!(
        layouts["enum"]
            .as_array()
            .unwrap()
            .contains(&"sharded".into())
    );

    let vesta = document(&router_with(Layout::vesta_max_peak().unwrap(), 100)).await;
    assert_eq!(param(&vesta, "/makeid", "genMethod").unwrap()["maximum"], 3);
    assert_eq!(
        param(&vesta, "/expid", "id").unwrap()["maximum"],
        u64::MAX,
        "no sign bit"
    );
    let keyworker = document(&router_with(Layout::keyworker().unwrap(), 100)).await;
    assert_eq!(
        param(&keyworker, "/makeid", "process").unwrap()["maximum"],
        31
    );
    assert_eq!(
        param(&keyworker, "/makeid", "machine").unwrap()["maximum"],
        31
    );
}

#[tokio::test]
async fn the_stated_patterns_take_exactly_what_the_store_takes() {
    let doc = document(&router()).await;
    let pattern_of = |schema: &Value| {
        let source = schema["pattern"].as_str().unwrap().to_owned();
        let max = usize::try_from(schema["maxLength"].as_u64().unwrap()).unwrap();
        let regex = regex::Regex::new(&source).unwrap();
        move |text: &str| text.chars().count() <= max && !text.is_empty() && regex.is_match(text)
    };
    let tag = pattern_of(&doc["paths"]["/v1/segments/{tag}"]["get"]["parameters"][0]["schema"]);
    let name = pattern_of(&doc["components"]["schemas"]["AppUpdate"]["properties"]["name"]);
    let description =
        pattern_of(&doc["components"]["schemas"]["TagUpdate"]["properties"]["description"]);
    let samples = [
        "a",
        "order",
        " a",
        "a ",
        "a b",
        "\u{3000}x",
        "x\u{85}",
        "\u{feff}x",
        "x\u{feff}",
        "a\tb",
        "a\u{7f}b",
        "\u{a0}",
        "中文",
        "-",
        " ",
        "a\nb",
        "x\u{2028}",
        "\u{200b}",
        "a\0b",
    ];
    let long = [
        "x".repeat(128),
        "x".repeat(129),
        format!(" {}", "x".repeat(127)),
    ];
    for sample in samples
        .iter()
        .copied()
        .chain(long.iter().map(String::as_str))
    {
        assert_eq!(
            tag(sample),
            uidgen_store::validate_tag(sample).is_ok(),
            "tag {sample:?}"
        );
        let spec = uidgen_store::AppSpec::new(1, sample);
        assert_eq!(name(sample), spec.validate().is_ok(), "app name {sample:?}");
        assert_eq!(
            description(sample),
            uidgen_store::validate_description(sample).is_ok(),
            "description {sample:?}"
        );
    }
}

#[tokio::test]
async fn every_timestamp_the_make_body_allows_is_taken() {
    for layout in [
        Layout::baidu("2024-01-01").unwrap(),
        Layout::snowflake().unwrap(),
        Layout::vesta_max_peak().unwrap(),
        Layout::sonyflake().unwrap(),
    ] {
        let r = router_with(layout.clone(), 100);
        let doc = document(&r).await;
        let schema = &doc["components"]["schemas"]["MakeRequest"]["properties"]["timestamp"];
        let choices = schema["oneOf"].as_array().unwrap();
        let millis = &choices[0];
        let pattern = regex::Regex::new(choices[1]["pattern"].as_str().unwrap()).unwrap();
        let make = |timestamp: Value| {
            let r = r.clone();
            async move {
                let body = serde_json::json!({"timestamp": timestamp, "worker": 0, "sequence": 0});
                call(&r, "POST", "/v1/ids/make", &[], &body.to_string()).await
            }
        };
        let (first, last) = (
            millis["minimum"].as_u64().unwrap(),
            millis["maximum"].as_u64().unwrap(),
        );
        for ms in [first, last] {
            let (status, body) = make(ms.into()).await;
            assert_eq!(status, StatusCode::OK, "{}: {ms}: {body}", layout.name());
        }
        for ms in [first - 1, last + 1] {
            let (status, _) = make(ms.into()).await;
            assert_eq!(
                status,
                StatusCode::BAD_REQUEST,
                "{}: {ms} is outside",
                layout.name()
            );
        }
        // The earliest and latest texts the pattern allows: the first and last whole years.
        let year = |ms: u64| {
            uidgen_core::calendar::format_iso8601(ms)[..4]
                .parse::<u32>()
                .unwrap()
        };
        for text in [
            format!("{}-01-01T00:00:00Z", year(first) + 1),
            format!("{}-12-28T23:59:59.999Z", year(last) - 1),
        ] {
            assert!(
                pattern.is_match(&text),
                "{}: {text} does not match {pattern}",
                layout.name()
            );
            let (status, body) = make(text.clone().into()).await;
            assert_eq!(status, StatusCode::OK, "{}: {text}: {body}", layout.name());
        }
        for text in [
            format!("{}-12-31T23:59:59Z", year(first)),
            format!("{}-01-01T00:00:00Z", year(last)),
            format!("{}-02-29T00:00:00Z", year(first) + 1),
            format!("{}-01-01", year(first) + 1),
        ] {
            assert!(
                !pattern.is_match(&text),
                "{}: {text} matches {pattern}",
                layout.name()
            );
        }
    }
}

#[tokio::test]
async fn error_codes_the_document_names_are_codes_the_server_sends() {
    // Each `code` a response description names must be one docs/API.md lists in its error
    // tables (the lease route once named `invalid_lease_size` while the server sent
    // `invalid_size`).
    let api = include_str!("../../../../docs/API.md");
    let listed: std::collections::HashSet<&str> = api
        .lines()
        .filter(|line| line.starts_with("| 4") || line.starts_with("| 5"))
        .flat_map(|line| line.split('`').skip(1).step_by(2))
        .collect();
    let doc = document(&router()).await;
    let code = regex::Regex::new(r"`([a-z]+(?:_[a-z]+)+)`").unwrap();
    let mut named = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            for (status, response) in op["responses"].as_object().unwrap() {
                if status.starts_with('2') {
                    continue;
                }
                let text = response["description"].as_str().unwrap_or_default();
                for name in code.captures_iter(text).map(|c| c.get(1).unwrap().as_str()) {
                    assert!(
                        listed.contains(name),
                        "{method} {path} {status} names `{name}`, which docs/API.md's error tables do not list"
                    );
                    named += 1;
                }
            }
        }
    }
    assert!(named >= 5, "only {named} codes named");
}

/// The fallback lease routes: described with their bounds, and answering what they describe,
/// on a router without a fallback range and on one leasing from a SQLite store.
#[tokio::test]
async fn the_fallback_lease_routes_answer_what_they_describe() {
    let doc = document(&router()).await;
    let claim = &doc["components"]["schemas"]["ClaimFallbackRequest"];
    assert_eq!(claim["properties"]["ttl_ms"]["minimum"], 1000, "{claim}");
    assert_eq!(
        claim["properties"]["ttl_ms"]["maximum"], 86_400_000,
        "{claim}"
    );
    assert_eq!(claim["properties"]["holder"]["maxLength"], 111, "{claim}");
    let described = |path: &str, status: &str| {
        doc["paths"][path]["post"]["responses"][status]["content"]["application/json"]["schema"]
            .clone()
    };

    // No fallback range: a clear refusal naming the key.
    let body = r#"{"holder":"app/1","ttl_ms":60000}"#;
    let (status, text) = call(&router(), "POST", "/v1/fallback/leases", &[], body).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{text}");
    assert_eq!(json(&text)["code"], "fallback_disabled");
    assert!(text.contains("worker.fallback_range"), "{text}");
    assert!(
        described("/v1/fallback/leases", "404")
            .get("$ref")
            .is_some()
    );

    let (store, _) = uidgen_store::testing::fresh_store(uidgen_store::testing::TestDb::Sqlite)
        .await
        .unwrap();
    let layout = Layout::vesta_max_peak().unwrap();
    let generator = DefaultUidGenerator::new(layout, 1000, SystemClock).unwrap();
    let mut state = AppState::embedded(Arc::new(generator), 1000);
    let range = uidgen_worker::WorkerIdRange::new(0, 923).unwrap();
    state.fallback = Some(Arc::new(uidgen_store::FallbackLeases::new(store, range)));
    let r = app(Arc::new(state));

    let (status, text) = call(&r, "POST", "/v1/fallback/leases", &[], body).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let lease = json(&text);
    let schema = &doc["components"]["schemas"]["FallbackLease"];
    for key in schema["required"].as_array().unwrap() {
        assert!(
            lease.get(key.as_str().unwrap()).is_some(),
            "{key} missing: {text}"
        );
    }
    assert_eq!(lease["worker_id"], 0);
    assert_eq!(lease["layout"]["name"], "vesta_max_peak");
    assert!(lease["floor_ms"].as_u64().unwrap() < lease["valid_until_ms"].as_u64().unwrap());
    let holder = lease["holder"].as_str().unwrap().to_owned();
    assert!(holder.starts_with("app/1#"), "{holder}");

    let cases = [
        (
            "/v1/fallback/leases",
            r#"{"holder":"app/1","ttl_ms":999}"#.to_owned(),
            StatusCode::BAD_REQUEST,
            "invalid_parameter",
        ),
        (
            "/v1/fallback/leases",
            r#"{"holder":"","ttl_ms":60000}"#.to_owned(),
            StatusCode::BAD_REQUEST,
            "invalid_parameter",
        ),
        (
            "/v1/fallback/leases",
            "{}".to_owned(),
            StatusCode::BAD_REQUEST,
            "invalid_parameter",
        ),
        (
            "/v1/fallback/leases/0/renew",
            r#"{"holder":"app/1#0000000000000000","ttl_ms":60000}"#.to_owned(),
            StatusCode::CONFLICT,
            "fallback_lease_lost",
        ),
        (
            "/v1/fallback/leases/924/renew",
            format!(r#"{{"holder":"{holder}","ttl_ms":60000}}"#),
            StatusCode::BAD_REQUEST,
            "invalid_parameter",
        ),
        (
            "/v1/fallback/leases/x/renew",
            format!(r#"{{"holder":"{holder}","ttl_ms":60000}}"#),
            StatusCode::BAD_REQUEST,
            "invalid_parameter",
        ),
    ];
    for (uri, body, expected, code) in cases {
        let (status, text) = call(&r, "POST", uri, &[], &body).await;
        assert_eq!(
            (status, json(&text)["code"].as_str()),
            (expected, Some(code)),
            "{uri} {body}: {text}"
        );
        let path = if uri.ends_with("/renew") {
            "/v1/fallback/leases/{worker_id}/renew"
        } else {
            uri
        };
        assert!(
            described(path, status.as_str()).get("$ref").is_some(),
            "{path} does not describe {status}"
        );
    }
    let renew = format!(r#"{{"holder":"{holder}","ttl_ms":60000,"issued_until_ms":1}}"#);
    let (status, text) = call(&r, "POST", "/v1/fallback/leases/0/renew", &[], &renew).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert!(
        json(&text)["valid_until_ms"].as_u64().unwrap()
            >= lease["valid_until_ms"].as_u64().unwrap()
    );
    let release = format!(r#"{{"holder":"{holder}","issued_until_ms":1}}"#);
    let (status, text) = call(&r, "POST", "/v1/fallback/leases/0/release", &[], &release).await;
    assert_eq!(
        (status, json(&text)["released"].as_bool()),
        (StatusCode::OK, Some(true)),
        "{text}"
    );
    let (_, text) = call(&r, "POST", "/v1/fallback/leases/0/release", &[], &release).await;
    assert_eq!(json(&text)["released"], false, "{text}");
}
