#![allow(clippy::unwrap_used)]
//! The caller_token DAO: a token is shown once and stored hashed, listing shows no secret,
//! names are never reused, revoking takes the token out of the active set.

mod common;

use std::time::{SystemTime, UNIX_EPOCH};
use uidgen_store::testing::{TestDb, fresh_store};

use uidgen_store::{Revoked, StoreError, TokenScopes, token_hash};

fn now_ms() -> i64 {
    i64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

per_db! {
    async fn a_created_token_is_stored_hashed_listed_without_secret_and_revocable(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        let scopes = TokenScopes {
            routes: vec!["segments".into(), "ids".into()],
            tags: vec!["order".into()],
            apps: vec![],
            spaces: vec!["*".into()],
        };
        let created = store.create_caller_token("billing", &scopes, None).await.unwrap();
        assert!(created.secret.starts_with("uidgen_"), "{}", created.secret);
        assert_eq!(created.secret.len(), "uidgen_".len() + 64);
        let other = store
            .create_caller_token("reports", &TokenScopes::everything(), None)
            .await
            .unwrap();
        assert_ne!(created.secret, other.secret);

        let listed = store.list_caller_tokens().await.unwrap();
        assert_eq!(listed.len(), 2);
        assert_eq!(listed[0], created.token);
        assert_eq!(listed[0].scopes, scopes);

        let active = store.active_caller_token_hashes().await.unwrap();
        assert_eq!(active.len(), 2);
        assert_eq!(active[0].hash, token_hash(&created.secret));
        assert_eq!(active[0].name, "billing");
        assert_eq!(active[0].scopes, scopes);

        let taken = store.create_caller_token("billing", &scopes, None).await.unwrap_err();
        assert!(matches!(taken, StoreError::CallerTokenNameTaken(ref n) if n == "billing"), "{taken}");

        assert_eq!(store.revoke_caller_token(created.token.id).await.unwrap(), Revoked::Now);
        assert_eq!(store.revoke_caller_token(created.token.id).await.unwrap(), Revoked::Already);
        assert_eq!(store.revoke_caller_token(987_654).await.unwrap(), Revoked::Unknown);
        let active = store.active_caller_token_hashes().await.unwrap();
        assert_eq!(active.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["reports"]);
        let listed = store.list_caller_tokens().await.unwrap();
        assert!(listed[0].revoked_at_ms.is_some());
        assert!(listed[1].revoked_at_ms.is_none());
        // A revoked token's name stays taken.
        assert!(store.create_caller_token("billing", &scopes, None).await.is_err());
    }
}

per_db! {
    async fn bad_names_and_scopes_are_refused_before_the_database(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        for name in ["", "has space", "new\nline", &"x".repeat(65)] {
            let refused = store.create_caller_token(name, &TokenScopes::everything(), None).await;
            assert!(matches!(refused, Err(StoreError::InvalidInput(_))), "{name:?}");
        }
        let scopes = TokenScopes { tags: vec![String::new()], ..TokenScopes::default() };
        let refused = store.create_caller_token("ok", &scopes, None).await;
        assert!(matches!(refused, Err(StoreError::InvalidInput(_))));
        assert!(store.list_caller_tokens().await.unwrap().is_empty());
    }
}

per_db! {
    async fn an_expiry_is_stored_listed_and_read_back_and_one_in_the_past_is_refused(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        let scopes = TokenScopes { routes: vec!["ids".into()], ..TokenScopes::default() };
        let at = now_ms() + 3_600_000;
        let created = store.create_caller_token("hourly", &scopes, Some(at)).await.unwrap();
        assert_eq!(created.token.expires_ms, Some(at));
        let forever = store.create_caller_token("forever", &scopes, None).await.unwrap();
        assert_eq!(forever.token.expires_ms, None);
        let listed = store.list_caller_tokens().await.unwrap();
        assert_eq!(listed[0].expires_ms, Some(at));
        assert_eq!(listed[1].expires_ms, None, "0 in the row reads back as never");
        let active = store.active_caller_token_hashes().await.unwrap();
        assert_eq!(active[0].expires_ms, Some(at));
        assert_eq!(active[1].expires_ms, None);
        for past in [now_ms() - 1, 0, -5] {
            let refused = store.create_caller_token("late", &scopes, Some(past)).await;
            let Err(StoreError::InvalidInput(message)) = refused else {
                panic!("{past}: {refused:?}");
            };
            assert!(message.contains("not in the future"), "{message}");
        }
        assert_eq!(store.list_caller_tokens().await.unwrap().len(), 2);
    }
}
