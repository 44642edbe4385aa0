//! Load-time validation (docs/contract.md, "Configuration").
#![allow(clippy::unwrap_used, clippy::expect_used)]

use dsh_tool_subagent::provider::DurationSetting;
use dsh_tool_subagent::{ConfigError, MaxDepth, SubagentToolConfig};
use serde_json::json;

#[test]
fn a_minimal_config_has_every_default() {
    let config = SubagentToolConfig::from_json(&json!({"provider": "spawn"})).unwrap();
    assert_eq!(config, SubagentToolConfig::new("spawn"));
    assert_eq!(config.tool_name, "subagent");
    assert!(config.agent_options.is_none() && config.max_depth.is_none());
    assert!(!config.enable_run_in_background);
}

#[test]
fn max_depth_accepts_safe_integers_and_provider_managed() {
    for (value, expected) in [
        (json!(0), MaxDepth::Limit(dsh_subagent_api::DepthLimit::levels(0))),
        (json!(3), MaxDepth::Limit(dsh_subagent_api::DepthLimit::levels(3))),
        (json!(2.0), MaxDepth::Limit(dsh_subagent_api::DepthLimit::levels(2))),
        (
            json!(9_007_199_254_740_991_u64),
            MaxDepth::limit(9_007_199_254_740_991).unwrap(),
        ),
        (json!("provider-managed"), MaxDepth::ProviderManaged),
    ] {
        let config = SubagentToolConfig::from_json(&json!({"provider": "p", "maxDepth": value})).unwrap();
        assert_eq!(config.max_depth, Some(expected), "{value}");
    }
}

#[test]
fn max_depth_rejects_everything_else_with_the_contract_message() {
    // NaN and the infinities have no JSON form; the typed API cannot hold them either.
    for value in [
        json!("1"),
        json!(-1),
        json!(1.5),
        json!(-0.0),
        json!(9_007_199_254_740_992_u64),
        json!(1e300),
        json!(null),
        json!(true),
        json!("unbounded"),
    ] {
        let error = SubagentToolConfig::from_json(&json!({"provider": "p", "maxDepth": value})).unwrap_err();
        assert_eq!(error, ConfigError::InvalidMaxDepth, "{value}");
        assert_eq!(
            error.to_string(),
            "subagent maxDepth must be a non-negative safe integer"
        );
    }
    // The typed API cannot hold one past the range: the cap checks itself when made.
    assert_eq!(MaxDepth::limit(1 << 53), Err(ConfigError::InvalidMaxDepth));
    assert_eq!(
        "9007199254740992".parse::<MaxDepth>(),
        Err(ConfigError::InvalidMaxDepth)
    );
}

#[test]
fn an_empty_tool_filter_is_refused_and_partial_filters_keep_absent_lists_absent() {
    let error = SubagentToolConfig::from_json(&json!({"provider": "p", "toolFilter": {}})).unwrap_err();
    assert_eq!(error, ConfigError::EmptyToolFilter);
    assert!(error.to_string().contains("names neither `allow` nor `deny`"));
    let config =
        SubagentToolConfig::from_json(&json!({"provider": "p", "toolFilter": {"deny": ["subagent"]}})).unwrap();
    let filter = config.tool_filter.unwrap();
    assert_eq!(filter.allow, None);
    let grant_only = SubagentToolConfig::from_json(&json!({"provider": "p", "toolFilter": {"allow": []}})).unwrap();
    assert_eq!(grant_only.tool_filter.unwrap().allow, Some(vec![]));
}

#[test]
fn agent_options_are_kept_verbatim_and_absent_stays_absent() {
    let config = SubagentToolConfig::from_json(&json!({
        "provider": "p", "agentOptions": {"model": "child-model"}
    }))
    .unwrap();
    let options = config.agent_options.unwrap();
    assert_eq!(serde_json::to_value(options).unwrap(), json!({"model": "child-model"}));
}

#[test]
fn a_context_window_loads_checked_and_travels_whole() {
    let config = SubagentToolConfig::from_json(&json!({
        "provider": "p", "agentOptions": {"contextWindow": 32000}
    }))
    .unwrap();
    let options = config.agent_options.unwrap();
    assert_eq!(options.context_window.map(|window| window.tokens()), Some(32_000));
    assert_eq!(serde_json::to_value(options).unwrap(), json!({"contextWindow": 32000}));
}

#[test]
fn malformed_configs_name_the_key() {
    let cases = [
        json!("spawn"),
        json!({}),
        json!({"provider": 1}),
        json!({"provider": ""}),
        json!({"provider": "p", "toolName": ""}),
        json!({"provider": "p", "toolName": false}),
        json!({"provider": "p", "tool_name": "x"}),
        json!({"provider": "p", "persona": ["x"]}),
        json!({"provider": "p", "agentOptions": {"model": 3}}),
        json!({"provider": "p", "agentOptions": {"modle": "x"}}),
        json!({"provider": "p", "agentOptions": {"maxTokens": 0}}),
        json!({"provider": "p", "agentOptions": {"contextWindow": 100}}),
        json!({"provider": "p", "agentOptions": {"model": "m", "contextWindow": "128k"}}),
        json!({"provider": "p", "toolFilter": {"deny": "subagent"}}),
        json!({"provider": "p", "toolFilter": {"block": ["x"]}}),
        json!({"provider": "p", "enableRunInBackground": "no"}),
        json!({"provider": "p", "timeout": "10"}),
        json!({"provider": "p", "timeout": "0s"}),
        json!({"provider": "p", "timeout": 600}),
        json!({"provider": "p", "tokenLimit": 0}),
        json!({"provider": "p", "tokenLimit": -5}),
        json!({"provider": "p", "resultLimit": 255}),
        json!({"provider": "p", "resultLimit": "8k"}),
        json!({"provider": "p", "resultLimit": -1}),
    ];
    let mut rendered = Vec::new();
    for config in cases {
        let error = SubagentToolConfig::from_json(&config).unwrap_err();
        rendered.push(format!("{config} -> {error}"));
    }
    insta::assert_snapshot!("config_errors", rendered.join("\n"));
}

#[test]
fn timeouts_and_token_limits_are_read_from_json() {
    let config =
        SubagentToolConfig::from_json(&json!({"provider": "p", "timeout": "10min", "tokenLimit": 5000})).unwrap();
    assert_eq!(config.timeout, Some(std::time::Duration::from_secs(600)));
    assert_eq!(config.token_limit.map(|limit| limit.tokens()), Some(5000));
    for (text, millis) in [("500ms", 500), ("90s", 90_000), ("2 h", 7_200_000), ("3m", 180_000)] {
        assert_eq!(
            text.parse::<DurationSetting>().map(DurationSetting::get),
            Ok(std::time::Duration::from_millis(millis)),
            "{text}"
        );
    }
    for bad in ["", "10", "s", "-1s", "1.5s", "0ms", "10 days"] {
        assert!(bad.parse::<DurationSetting>().is_err(), "{bad}");
    }
}

#[test]
fn result_limits_are_read_from_json_and_default_to_8000_tokens() {
    let config = SubagentToolConfig::from_json(&json!({"provider": "p", "resultLimit": 256})).unwrap();
    assert_eq!(config.result_limit, Some(dsh_tools::ResultLimit::MIN));
    assert_eq!(config.result_limit_or_default().bytes(), 1_024);
    let default = SubagentToolConfig::from_json(&json!({"provider": "p"})).unwrap();
    assert_eq!(default.result_limit, None);
    assert_eq!(default.result_limit_or_default(), dsh_tools::ResultLimit::DEFAULT);
    assert_eq!(default.result_limit_or_default().bytes(), 32_000);
}

#[test]
fn contract_config_errors_are_pinned() {
    let errors = [
        ConfigError::InvalidMaxDepth.to_string(),
        ConfigError::EmptyToolFilter.to_string(),
        ConfigError::CannotEnforceMaxDepth { provider: "acp".into() }.to_string(),
    ];
    insta::assert_snapshot!("contract_config_errors", errors.join("\n"));
}
