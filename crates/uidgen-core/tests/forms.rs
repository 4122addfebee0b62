//! Friendly forms (base36, base62, prefix + date + number) round-trip and sort as their numbers,
//! and decoded IDs show their time in a chosen zone.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use proptest::prelude::*;
use uidgen_core::calendar::CivilDate;
use uidgen_core::forms::DatedForm;
use uidgen_core::layout::PRESET_NAMES;
use uidgen_core::{IdForm, Layout, UidError, Zone};

/// An ID the layout holds, from any 64 bits.
fn fit(layout: &Layout, raw: u64) -> u64 {
    let mut id = raw & layout.max_id();
    while layout.decompose(id).is_err() {
        id >>= 1;
    }
    id
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    /// Every form of every preset reads back to the same ID; the radix forms have one length
    /// per layout, and their text order is the IDs' order.
    #[test]
    fn radix_forms_round_trip_and_sort_as_the_ids(
        preset in 0..PRESET_NAMES.len(), a in any::<u64>(), b in any::<u64>(),
    ) {
        let layout = Layout::preset(PRESET_NAMES[preset]).unwrap();
        let (a, b) = (fit(&layout, a), fit(&layout, b));
        for form in IdForm::ALL {
            let (ta, tb) = (layout.render(a, form).unwrap(), layout.render(b, form).unwrap());
            prop_assert_eq!(layout.decode_form(&ta, form).unwrap().id, a);
            prop_assert_eq!(layout.decode_form(&tb, form).unwrap().id, b);
            if form != IdForm::Decimal {
                prop_assert_eq!(ta.len(), form.width(layout.max_id()));
                prop_assert_eq!(ta.len(), tb.len());
                prop_assert_eq!(ta.cmp(&tb), a.cmp(&b), "{} {} vs {}", form, ta, tb);
            }
        }
    }

    /// A dated text reads back to its date and number, and texts of one form sort by date,
    /// then number.
    #[test]
    fn dated_forms_round_trip_and_sort_by_date_then_number(
        day_a in 0..2_932_896u64, day_b in 0..2_932_896u64,
        number_a in any::<u64>(), number_b in any::<u64>(), digits in 1..=20u32,
    ) {
        let form = DatedForm::new("ORD", digits).unwrap();
        // Numbers the form holds: all of u64 at 20 digits, below 10^digits otherwise.
        let held = |n: u64| form.max_number().checked_add(1).map_or(n, |limit| n % limit);
        let (na, nb) = (held(number_a), held(number_b));
        let da = CivilDate::of_millis(day_a * 86_400_000).unwrap();
        let db = CivilDate::of_millis(day_b * 86_400_000).unwrap();
        let (ta, tb) = (form.render(da, na).unwrap(), form.render(db, nb).unwrap());
        let pa = form.parse(&ta).unwrap();
        prop_assert_eq!((pa.date, pa.number), (da, na));
        prop_assert_eq!(ta.cmp(&tb), (da, na).cmp(&(db, nb)), "{} vs {}", ta, tb);
    }
}

#[test]
fn the_issue_example_renders_and_parses() {
    let form = DatedForm::new("ORD", 6).unwrap();
    let day = CivilDate::new(2026, 11, 25).unwrap();
    assert_eq!(form.render(day, 123).unwrap(), "ORD20261125-000123");
    let back = form.parse(" ORD20261125-000123\n").unwrap();
    assert_eq!(
        (back.date.to_string(), back.number),
        ("2026-11-25".to_owned(), 123)
    );
    assert_eq!(
        form.render(day, 1_000_000).unwrap_err(),
        UidError::FormOverflow {
            value: 1_000_000,
            digits: 6
        }
    );
    for (text, reason) in [
        (
            "ORD2026112-000123",
            "the date is not a calendar day YYYYMMDD from 1970 on",
        ),
        (
            "ORD20260229-000123",
            "the date is not a calendar day YYYYMMDD from 1970 on",
        ),
        (
            "ORD19691231-000123",
            "the date is not a calendar day YYYYMMDD from 1970 on",
        ),
        (
            "ORD20261125-00012x",
            "the number does not have the form's fixed count of digits",
        ),
        (
            "ORD20261125-0000123",
            "the number does not have the form's fixed count of digits",
        ),
        (
            "ord20261125-000123",
            "it does not start with the form's prefix",
        ),
        ("ORD20261125", "expected YYYYMMDD-number after the prefix"),
    ] {
        match form.parse(text) {
            Err(UidError::MalformedForm {
                form: "dated",
                reason: r,
                ..
            }) => assert_eq!(r, reason, "{text}"),
            other => panic!("{text}: {other:?}"),
        }
    }
    assert!(matches!(
        CivilDate::new(10_000, 1, 1),
        Err(UidError::InvalidDate { .. })
    ));
}

#[test]
fn radix_text_for_another_layout_or_width_is_refused() {
    let snowflake = Layout::snowflake().unwrap();
    let js = Layout::safe_js().unwrap();
    let id = js.compose(&js.parts(5, 5, 5)).unwrap();
    let short = js.render(id, IdForm::Base62).unwrap();
    assert_eq!(short.len(), 9);
    assert!(matches!(
        snowflake.decode_form(&short, IdForm::Base62),
        Err(UidError::MalformedForm { form: "base62", .. })
    ));
    // A snowflake ID with its sign bit set cannot be rendered: it is not a snowflake ID.
    assert!(matches!(
        snowflake.render(1 << 63, IdForm::Base36),
        Err(UidError::MalformedId { .. })
    ));
}

#[test]
fn decode_shows_the_time_in_the_zone_asked_for_and_names_it() {
    // Baidu's legacy epoch is midnight in China: its parseUID, run on a JVM in Asia/Shanghai,
    // printed time 0 as "2016-05-20 00:00:00".
    let legacy = Layout::baidu_legacy().unwrap();
    let decoded = legacy
        .decode(legacy.compose(&legacy.parts(0, 1, 2)).unwrap())
        .unwrap();
    let shanghai = Zone::parse("Asia/Shanghai").unwrap();
    assert_eq!(
        decoded.to_baidu_json_in(&shanghai),
        format!(
            r#"{{"UID":"{}","timestamp":"2016-05-20 00:00:00","timeZone":"Asia/Shanghai","workerId":"1","sequence":"2"}}"#,
            decoded.id
        )
    );
    // UTC stays the default, and says so.
    assert!(
        decoded
            .to_baidu_json()
            .contains(r#""timestamp":"2016-05-19 16:00:00","timeZone":"UTC""#)
    );
    assert_eq!(decoded.timestamp_iso8601(), "2016-05-19T16:00:00.000Z");
    assert_eq!(
        decoded.timestamp_in(&shanghai),
        "2016-05-20T00:00:00.000+08:00[Asia/Shanghai]"
    );
    assert_eq!(
        decoded.timestamp_in(&Zone::parse("+08:00").unwrap()),
        "2016-05-20T00:00:00.000+08:00"
    );
    for bad in ["", "Asia/Nowhere", "../etc/passwd", "+8:00", "UTC+8"] {
        assert!(
            matches!(Zone::parse(bad), Err(UidError::InvalidZone { .. })),
            "{bad}"
        );
    }
}
