//! JWT authentication and role checks on the platform and user routes.

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::{fixtures, helpers::TestApp};
use parley::{CallerRole, JwtKeys};

#[tokio::test]
async fn bad_credentials_are_401_and_wrong_roles_403() {
    let app = TestApp::spawn().await;
    let body = fixtures::good_match();
    let expired = {
        // Signed with the right secret, expired an hour ago.
        let claims = json!({ "sub": "platform", "role": "service", "exp": chrono::Utc::now().timestamp() - 3600 });
        jsonwebtoken::encode(
            &jsonwebtoken::Header::default(),
            &claims,
            &jsonwebtoken::EncodingKey::from_secret(crate::helpers::TEST_SECRET.as_bytes()),
        )
        .unwrap()
    };
    let wrong_secret = JwtKeys::new(b"another-secret-entirely-123")
        .mint("platform", CallerRole::Service, std::time::Duration::from_secs(60))
        .unwrap();
    let no_exp = jsonwebtoken::encode(
        &jsonwebtoken::Header::default(),
        &json!({ "sub": "platform", "role": "service" }),
        &jsonwebtoken::EncodingKey::from_secret(crate::helpers::TEST_SECRET.as_bytes()),
    )
    .unwrap();

    for token in [None, Some("garbage"), Some(expired.as_str()), Some(wrong_secret.as_str()), Some(no_exp.as_str())] {
        let answer = app.call(Method::POST, "/api/negotiations", token, Some(&body)).await;
        answer.assert_error(StatusCode::UNAUTHORIZED, "unauthorized");
        let answer = app.call(Method::GET, "/api/opportunities", token, None).await;
        answer.assert_error(StatusCode::UNAUTHORIZED, "unauthorized");
    }
    // A user may not start negotiations.
    let answer = app.post("/api/negotiations", &app.user_token("user-maya"), &body).await;
    answer.assert_error(StatusCode::FORBIDDEN, "forbidden");
    // An unknown role in the token is not a valid token.
    let odd_role = jsonwebtoken::encode(
        &jsonwebtoken::Header::default(),
        &json!({ "sub": "x", "role": "root", "exp": chrono::Utc::now().timestamp() + 600 }),
        &jsonwebtoken::EncodingKey::from_secret(crate::helpers::TEST_SECRET.as_bytes()),
    )
    .unwrap();
    app.call(Method::GET, "/api/opportunities", Some(&odd_role), None)
        .await
        .assert_error(StatusCode::UNAUTHORIZED, "unauthorized");
    // Admin may do what the service may.
    let admin = app.token("ops", CallerRole::Admin);
    assert_eq!(app.post("/api/negotiations", &admin, &body).await.status, StatusCode::CREATED);
    assert_eq!(app.count("opportunities").await, 1);
}

#[tokio::test]
async fn health_and_readiness_need_no_credentials() {
    let app = TestApp::spawn().await;
    let answer = app.call(Method::GET, "/healthz", None, None).await;
    assert_eq!(answer.status, StatusCode::OK);
    let answer = app.call(Method::GET, "/readyz", None, None).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.body["status"], "ready");
    app.call(Method::GET, "/no/such/route", None, None).await.assert_error(StatusCode::NOT_FOUND, "not_found");
}
