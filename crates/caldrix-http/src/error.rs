//! Errors in each API's own shape. One `ApiError` carries what went wrong (its class, a
//! message, the parameter it names, OpenAI's `code`); the API the request spoke decides how it
//! is written: OpenAI's `{"error": {message, type, param, code}}` or Anthropic's
//! `{"type": "error", "error": {type, message}}`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use caldrix_client::ClientError;
use caldrix_proto::ErrorKind;
use serde_json::{Value, json};

/// Which API's shapes a request is answered in. The Responses API writes OpenAI's errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    OpenAi,
    Anthropic,
}

/// What kind of failure, as each API's error types tell them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// 400: the request is wrong (a field, a bound, a prompt over the window).
    BadRequest,
    /// 401: no key, or the wrong one.
    Auth,
    /// 403: a web page's request (its Origin), or a Host that is not this server's.
    Forbidden,
    /// 404: an unknown model or path.
    NotFound,
    /// 413: the body is over the limit.
    TooLarge,
    /// 429: the pool's `max_connections` are open.
    RateLimit,
    /// 503: the pool cannot be reached.
    Unavailable,
    /// 500: the pool or the engine failed.
    Internal,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    pub class: Class,
    pub message: String,
    /// The request field the error is about (OpenAI's `param`).
    pub param: Option<String>,
    /// OpenAI's `code` (`model_not_found`, `context_length_exceeded`, ...).
    pub code: Option<&'static str>,
}

impl ApiError {
    pub fn new(class: Class, message: impl Into<String>) -> ApiError {
        ApiError { class, message: message.into(), param: None, code: None }
    }

    pub fn bad(message: impl Into<String>) -> ApiError {
        ApiError::new(Class::BadRequest, message)
    }

    /// A 400 about one field, naming it.
    pub fn field(param: impl Into<String>, message: impl Into<String>) -> ApiError {
        ApiError { param: Some(param.into()), ..ApiError::bad(message) }
    }

    pub fn with_code(mut self, code: &'static str) -> ApiError {
        self.code = Some(code);
        self
    }

    pub fn status(&self) -> StatusCode {
        match self.class {
            Class::BadRequest => StatusCode::BAD_REQUEST,
            Class::Auth => StatusCode::UNAUTHORIZED,
            Class::Forbidden => StatusCode::FORBIDDEN,
            Class::NotFound => StatusCode::NOT_FOUND,
            Class::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Class::RateLimit => StatusCode::TOO_MANY_REQUESTS,
            Class::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Class::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The error object inside OpenAI's envelope (also what a Responses stream's
    /// `response.failed` carries).
    pub fn openai_error(&self) -> Value {
        // OpenAI answers an unknown model and a body too large with `invalid_request_error`
        // (the code tells them apart).
        let kind = match self.class {
            Class::BadRequest | Class::NotFound | Class::TooLarge | Class::Forbidden => {
                "invalid_request_error"
            }
            Class::Auth => "authentication_error",
            Class::RateLimit => "rate_limit_error",
            Class::Unavailable | Class::Internal => "server_error",
        };
        json!({
            "message": self.message,
            "type": kind,
            "param": self.param,
            "code": self.code,
        })
    }

    /// The whole body in `api`'s shape.
    pub fn body(&self, api: Api) -> Value {
        match api {
            Api::OpenAi => json!({ "error": self.openai_error() }),
            Api::Anthropic => {
                let kind = match self.class {
                    Class::BadRequest => "invalid_request_error",
                    Class::Auth => "authentication_error",
                    Class::Forbidden => "permission_error",
                    Class::NotFound => "not_found_error",
                    Class::TooLarge => "request_too_large",
                    Class::RateLimit => "rate_limit_error",
                    Class::Unavailable => "overloaded_error",
                    Class::Internal => "api_error",
                };
                json!({ "type": "error", "error": { "type": kind, "message": self.message } })
            }
        }
    }

    pub fn response(&self, api: Api) -> Response {
        (self.status(), axum::Json(self.body(api))).into_response()
    }
}

/// The pool's refusals and the connection's failures as HTTP errors.
impl From<ClientError> for ApiError {
    fn from(e: ClientError) -> ApiError {
        match e {
            ClientError::Pool { kind, message } => {
                let class = match kind {
                    ErrorKind::TooManyConnections => Class::RateLimit,
                    ErrorKind::UnknownMember => Class::NotFound,
                    ErrorKind::TooLong | ErrorKind::BadConstraint | ErrorKind::BadRequest => {
                        Class::BadRequest
                    }
                    _ => Class::Internal,
                };
                let error = ApiError::new(class, format!("the pool refused: {message}"));
                match kind {
                    ErrorKind::TooLong => error.with_code("context_length_exceeded"),
                    ErrorKind::BadConstraint => error.with_code("invalid_schema"),
                    _ => error,
                }
            }
            e @ (ClientError::Connect { .. } | ClientError::Untrusted(_)) => {
                ApiError::new(Class::Unavailable, e.to_string())
            }
            other => ApiError::new(Class::Internal, other.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_api_has_its_shape() {
        let e = ApiError::field("n", "n must be 1, not 2");
        assert_eq!(
            e.body(Api::OpenAi),
            json!({"error": {"message": "n must be 1, not 2", "type": "invalid_request_error",
                             "param": "n", "code": null}})
        );
        assert_eq!(
            e.body(Api::Anthropic),
            json!({"type": "error", "error": {"type": "invalid_request_error",
                                               "message": "n must be 1, not 2"}})
        );
        let missing = ApiError::new(Class::NotFound, "no model x").with_code("model_not_found");
        assert_eq!(missing.status(), StatusCode::NOT_FOUND);
        assert_eq!(missing.body(Api::OpenAi)["error"]["type"], "invalid_request_error");
        assert_eq!(missing.body(Api::OpenAi)["error"]["code"], "model_not_found");
        assert_eq!(missing.body(Api::Anthropic)["error"]["type"], "not_found_error");
        let large = ApiError::new(Class::TooLarge, "over");
        assert_eq!(large.body(Api::Anthropic)["error"]["type"], "request_too_large");
    }

    #[test]
    fn the_pool_s_refusals_map_to_statuses_and_codes() {
        let pool = |kind| ClientError::Pool { kind, message: "m".into() };
        let busy = ApiError::from(pool(ErrorKind::TooManyConnections));
        assert_eq!(busy.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(busy.body(Api::Anthropic)["error"]["type"], "rate_limit_error");
        let long = ApiError::from(pool(ErrorKind::TooLong));
        assert_eq!(
            (long.status(), long.code),
            (StatusCode::BAD_REQUEST, Some("context_length_exceeded"))
        );
        assert_eq!(
            ApiError::from(pool(ErrorKind::Engine)).status(),
            StatusCode::INTERNAL_SERVER_ERROR
        );
        let gone = ApiError::from(ClientError::Closed);
        assert_eq!(gone.status(), StatusCode::INTERNAL_SERVER_ERROR);
    }
}
