//! The eight error codes of spec §5.10 and the ERROR payload.

use serde::{Deserialize, Serialize};

/// Error codes of spec §5.10. `retryable` is fixed per code by the spec's table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    AuthFailed,
    SessionInvalid,
    StreamSeqError,
    PayloadTooLarge,
    ServerBusy,
    MalformedPayload,
    InternalError,
    RequestTimeout,
}

impl ErrorCode {
    pub const ALL: [ErrorCode; 8] = [
        ErrorCode::AuthFailed,
        ErrorCode::SessionInvalid,
        ErrorCode::StreamSeqError,
        ErrorCode::PayloadTooLarge,
        ErrorCode::ServerBusy,
        ErrorCode::MalformedPayload,
        ErrorCode::InternalError,
        ErrorCode::RequestTimeout,
    ];

    /// The `retryable` value the spec assigns to this code.
    pub fn retryable(self) -> bool {
        match self {
            ErrorCode::AuthFailed => true,
            ErrorCode::SessionInvalid => false,
            ErrorCode::StreamSeqError => true,
            ErrorCode::PayloadTooLarge => false,
            ErrorCode::ServerBusy => true,
            ErrorCode::MalformedPayload => false,
            ErrorCode::InternalError => true,
            ErrorCode::RequestTimeout => true,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::AuthFailed => "AUTH_FAILED",
            ErrorCode::SessionInvalid => "SESSION_INVALID",
            ErrorCode::StreamSeqError => "STREAM_SEQ_ERROR",
            ErrorCode::PayloadTooLarge => "PAYLOAD_TOO_LARGE",
            ErrorCode::ServerBusy => "SERVER_BUSY",
            ErrorCode::MalformedPayload => "MALFORMED_PAYLOAD",
            ErrorCode::InternalError => "INTERNAL_ERROR",
            ErrorCode::RequestTimeout => "REQUEST_TIMEOUT",
        }
    }

    /// Short human message (Chinese, as the spec's own examples are) used as `error_msg`
    /// unless the caller gives a more specific one.
    pub fn default_message(self) -> &'static str {
        match self {
            ErrorCode::AuthFailed => "认证失败",
            ErrorCode::SessionInvalid => "会话不存在或已超时",
            ErrorCode::StreamSeqError => "流式序号异常",
            ErrorCode::PayloadTooLarge => "数据过大",
            ErrorCode::ServerBusy => "服务过载，请稍后重试",
            ErrorCode::MalformedPayload => "报文格式错误",
            ErrorCode::InternalError => "服务端内部错误",
            ErrorCode::RequestTimeout => "处理超时",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// ERROR payload (spec §5.10).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorPayload {
    pub error_code: ErrorCode,
    pub error_msg: String,
    #[serde(default)]
    pub error_detail: String,
    pub retryable: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

impl ErrorPayload {
    /// An error with the spec's `retryable` for `code` and its default message.
    pub fn new(code: ErrorCode, detail: impl Into<String>) -> Self {
        ErrorPayload {
            error_code: code,
            error_msg: code.default_message().to_string(),
            error_detail: detail.into(),
            retryable: code.retryable(),
            request_id: None,
        }
    }

    pub fn with_message(mut self, msg: impl Into<String>) -> Self {
        self.error_msg = msg.into();
        self
    }

    pub fn with_request(mut self, request_id: Option<String>) -> Self {
        self.request_id = request_id;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retryable_matches_spec_table() {
        let expected = [
            ("AUTH_FAILED", true),
            ("SESSION_INVALID", false),
            ("STREAM_SEQ_ERROR", true),
            ("PAYLOAD_TOO_LARGE", false),
            ("SERVER_BUSY", true),
            ("MALFORMED_PAYLOAD", false),
            ("INTERNAL_ERROR", true),
            ("REQUEST_TIMEOUT", true),
        ];
        for (code, (name, retry)) in ErrorCode::ALL.iter().zip(expected) {
            assert_eq!(code.as_str(), name);
            assert_eq!(code.retryable(), retry, "{name}");
            assert_eq!(serde_json::to_value(code).unwrap(), serde_json::json!(name));
        }
    }
}
