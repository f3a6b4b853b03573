//! Tenant keys: which rows a role (and the tenant it acts for) owns when
//! tenant isolation is on.

/// The tenant key of role `role` acting for `tenant` (None or empty: itself).
pub fn tenant_key(role: &str, tenant: Option<&str>) -> String {
    let plain = role.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && role
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '$');
    let mut key =
        if plain { role.to_owned() } else { format!("\"{}\"", role.replace('"', "\"\"")) };
    if let Some(tenant) = tenant.filter(|t| !t.is_empty()) {
        key.push('/');
        key.push_str(tenant);
    }
    key
}

#[cfg(test)]
mod unit {
    use super::tenant_key;

    #[test]
    fn role_and_tenant_never_collide() {
        assert_eq!(tenant_key("app", None), "app");
        assert_eq!(tenant_key("app", Some("")), "app");
        assert_eq!(tenant_key("app", Some("acme")), "app/acme");
        assert_eq!(tenant_key("a/b", None), "\"a/b\"");
        assert_eq!(tenant_key("a", Some("b")), "a/b");
        assert_eq!(tenant_key("Ana", None), "\"Ana\"");
        assert_eq!(tenant_key("x\"y", Some("t")), "\"x\"\"y\"/t");
    }
}
