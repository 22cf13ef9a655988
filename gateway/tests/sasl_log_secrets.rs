//! AUTH-SASL-SECRET-1 with every log at trace level captured, alone in its test binary: tracing
//! caches per call site whether anyone listens, and a call site first reached by a concurrent
//! test on a thread with no subscriber can be cached as unheard while this test's scoped
//! subscriber is installed, so lines it must find would go missing.

mod sasl_support;

use iggy_common::UserStatus;
use kafka_iggy_gateway::backend::Backend;
use sasl_support::*;
use std::sync::Arc;

/// Everything written to it, for reading back what was logged.
#[derive(Clone, Default)]
struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// AUTH-SASL-SECRET-1: logins that succeed and fail, by password and by token, with every log
/// at trace level captured: no secret appears, while the failure itself is logged.
#[test]
fn auth_sasl_secret_1_credentials_never_reach_the_log_at_trace_level() {
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(captured.clone())
        .with_ansi(false)
        .finish();
    let password = "Sup3r-S3cret-Passw0rd";
    let wrong = "Wr0ng-S3cret-Guess";
    let token = tracing::subscriber::with_default(subscriber, || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let g = gateway();
            g.backend
                .create_user("ivan", password, UserStatus::Active, None)
                .unwrap();
            let (as_ivan, _) = g
                .backend
                .open_session(&kafka_iggy_gateway::auth::credentials::Credentials::password(
                    "ivan", password,
                ))
                .await
                .unwrap();
            let token = as_ivan.create_personal_access_token("ci", None).unwrap();
            assert_eq!(
                login(&g, &mut g.new_connection(peer()), "ivan", password)
                    .await
                    .0
                    .error_code,
                0
            );
            assert_eq!(
                login(&g, &mut g.new_connection(peer()), "ivan", &token)
                    .await
                    .0
                    .error_code,
                0
            );
            assert_eq!(
                login(&g, &mut g.new_connection(peer()), "ivan", wrong)
                    .await
                    .0
                    .error_code,
                58
            );
            let mut raw = g.new_connection(peer());
            handshake(&g, &mut raw, 0).await;
            let _ = g.handle(plain("ivan", wrong), &mut raw).await;
            tracing::debug!(config = ?g.config, "the gateway's configuration");
            token
        })
    });
    let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(
        log.contains("SASL authentication failed"),
        "the failure is logged:\n{log}"
    );
    assert!(
        log.contains("iggy_password: Secret(<redacted>)"),
        "the configuration prints redacted:\n{log}"
    );
    for secret in [password, wrong, token.as_str()] {
        assert!(!log.contains(secret), "a secret reached the log:\n{log}");
    }
}
