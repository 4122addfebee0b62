#![allow(clippy::unwrap_used)]
//! The caller_token DAO: a token is shown once and stored hashed, listing shows no secret,
//! names are never reused, revoking takes the token out of the active set.

mod common;

use uidgen_store::testing::{TestDb, fresh_store};
use uidgen_store::{Revoked, StoreError, TokenScopes, token_hash};

per_db! {
    async fn a_created_token_is_stored_hashed_listed_without_secret_and_revocable(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        let scopes = TokenScopes {
            routes: vec!["segments".into(), "ids".into()],
            tags: vec!["order".into()],
            apps: vec![],
            spaces: vec!["*".into()],
        };
        let created = store.create_caller_token("billing", &scopes).await.unwrap();
        assert!(created.secret.starts_with("uidgen_"), "{}", created.secret);
        assert_eq!(created.secret.len(), "uidgen_".len() + 64);
        let other = store
            .create_caller_token("reports", &TokenScopes::everything())
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

        let taken = store.create_caller_token("billing", &scopes).await.unwrap_err();
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
        assert!(store.create_caller_token("billing", &scopes).await.is_err());
    }
}

per_db! {
    async fn bad_names_and_scopes_are_refused_before_the_database(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        for name in ["", "has space", "new\nline", &"x".repeat(65)] {
            let refused = store.create_caller_token(name, &TokenScopes::everything()).await;
            assert!(matches!(refused, Err(StoreError::InvalidInput(_))), "{name:?}");
        }
        let scopes = TokenScopes { tags: vec![String::new()], ..TokenScopes::default() };
        let refused = store.create_caller_token("ok", &scopes).await;
        assert!(matches!(refused, Err(StoreError::InvalidInput(_))));
        assert!(store.list_caller_tokens().await.unwrap().is_empty());
    }
}
