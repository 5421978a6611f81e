//! What the visitor reads: the human-facing messages of the session's frames, in one place.
//! (ERROR details are for the client's developer and stay beside the check that sends them.)

/// REGISTER_ACK `message`.
pub const REGISTERED: &str = "会话创建成功";
/// REGISTER_ACK `message` of a resumed session.
pub const RESUMED: &str = "会话已恢复 (session resumed)";
/// SHUTDOWN `reason` when the session's idle timeout ran out.
pub const SESSION_EXPIRED: &str = "会话超时";
/// SHUTDOWN `reason` when the server begins shutting down.
pub const SERVER_SHUTTING_DOWN: &str = "服务器正在关闭 (server shutting down)";
/// SESSION_INFO `message`.
pub const QUERY_OK: &str = "查询成功";

/// SESSION_WARN `message`: the session ends in `remaining_seconds` unless the visitor acts.
pub fn expire_soon(remaining_seconds: u64) -> String {
    format!(
        "会话即将在 {} 后超时，请发送请求刷新",
        human_duration(remaining_seconds)
    )
}

/// SESSION_INFO `message` when some queried fields are not known.
pub fn query_ok_ignoring(unknown: &[&str]) -> String {
    format!(
        "{QUERY_OK}；已忽略未知字段 (unknown fields ignored): {}",
        unknown.join(", ")
    )
}

/// INTERRUPT_ACK `message` when `n` requests were interrupted.
pub fn interrupted(n: usize) -> String {
    format!("已中断 {n} 个请求")
}

/// INTERRUPT_ACK `message` when the named request is not in flight.
pub fn not_in_flight(request_id: &str) -> String {
    format!("请求 {request_id} 不存在或已完成 (not in flight)")
}

/// INTERRUPT_ACK `message` when nothing is in flight.
pub const NOTHING_IN_FLIGHT: &str = "没有进行中的请求 (nothing in flight)";

/// `90` → "1 分 30 秒", `120` → "2 分钟", `45` → "45 秒".
pub fn human_duration(secs: u64) -> String {
    if secs >= 60 && secs.is_multiple_of(60) {
        format!("{} 分钟", secs / 60)
    } else if secs >= 60 {
        format!("{} 分 {} 秒", secs / 60, secs % 60)
    } else {
        format!("{secs} 秒")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_naturally() {
        assert_eq!(human_duration(0), "0 秒");
        assert_eq!(human_duration(59), "59 秒");
        assert_eq!(human_duration(60), "1 分钟");
        assert_eq!(human_duration(90), "1 分 30 秒");
        assert_eq!(human_duration(300), "5 分钟");
        assert_eq!(expire_soon(120), "会话即将在 2 分钟 后超时，请发送请求刷新");
    }

    #[test]
    fn query_message_names_the_ignored_fields() {
        assert_eq!(
            query_ok_ignoring(&["a", "b"]),
            "查询成功；已忽略未知字段 (unknown fields ignored): a, b"
        );
    }
}
