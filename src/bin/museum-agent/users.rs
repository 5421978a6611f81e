//! `key …` and `account …`: the admin commands on the user store (SQLite or PostgreSQL).

use std::io::BufRead;
use std::sync::Arc;

use anyhow::Context;
use museum_agent::Config;
use museum_agent::auth::{generate_api_key, hash_password};
use museum_agent::store::{Store, UserStore};

use crate::{AccountCmd, KeyCmd, database_label};

/// Opens the user store `[database]` selects (SQLite file, or PostgreSQL with `url`).
async fn open_users(config: &Config) -> anyhow::Result<Arc<dyn UserStore>> {
    let store = Store::open_config(&config.database)
        .await
        .with_context(|| database_label(config))?;
    Ok(store.users())
}

/// Unix milliseconds as `YYYY-MM-DD HH:MM:SS UTC` ("-" for none).
fn fmt_ms(ms: Option<i64>) -> String {
    let Some(ms) = ms else {
        return "-".into();
    };
    let secs = ms.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = museum_agent::util::civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

pub(crate) async fn key_command(config: Config, cmd: KeyCmd) -> anyhow::Result<()> {
    let users = open_users(&config).await?;
    match cmd {
        KeyCmd::Create { name, hub_tier } => {
            let k = generate_api_key();
            users
                .insert_api_key(&name, &k.prefix, &k.hash, hub_tier.as_deref())
                .await?;
            eprintln!("API key {name:?} created. It is shown only this once; store it now:");
            println!("{}", k.key);
        }
        KeyCmd::List => {
            println!(
                "{:<6} {:<24} {:<12} {:<8} {:<23} last_used",
                "id", "name", "prefix", "state", "created"
            );
            for k in users.list_api_keys().await? {
                let state = if k.revoked { "revoked" } else { "active" };
                println!(
                    "{:<6} {:<24} {:<12} {:<8} {:<23} {}",
                    k.id,
                    k.name,
                    k.prefix,
                    state,
                    fmt_ms(Some(k.created_at)),
                    fmt_ms(k.last_used_at)
                );
            }
        }
        KeyCmd::Revoke { name_or_id } => {
            let already =
                users.list_api_keys().await?.into_iter().find(|k| {
                    k.revoked && (k.name == name_or_id || k.id.to_string() == name_or_id)
                });
            match already {
                Some(k) => println!(
                    "API key {} ({}) was already revoked; nothing changed",
                    k.name, k.prefix
                ),
                None => {
                    let k = users.revoke_api_key(&name_or_id).await?;
                    println!("revoked API key {} ({})", k.name, k.prefix);
                }
            }
        }
    }
    Ok(())
}

pub(crate) async fn account_command(config: Config, cmd: AccountCmd) -> anyhow::Result<()> {
    let users = open_users(&config).await?;
    match cmd {
        AccountCmd::Create { account } => {
            eprintln!("password for {account:?} (one line on standard input):");
            let mut line = String::new();
            std::io::stdin().lock().read_line(&mut line)?;
            let password = line.trim_end_matches(['\r', '\n']);
            anyhow::ensure!(
                password.len() >= 8,
                "the password must be at least 8 characters"
            );
            users
                .insert_account(&account, &hash_password(password))
                .await?;
            println!("account {account} created");
        }
        AccountCmd::List => {
            println!(
                "{:<6} {:<24} {:<9} {:<23} last_login",
                "id", "account", "state", "created"
            );
            for a in users.list_accounts().await? {
                let state = if a.disabled { "disabled" } else { "active" };
                println!(
                    "{:<6} {:<24} {:<9} {:<23} {}",
                    a.id,
                    a.account,
                    state,
                    fmt_ms(Some(a.created_at)),
                    fmt_ms(a.last_login_at)
                );
            }
        }
        AccountCmd::Disable { account } => {
            users.set_account_disabled(&account, true).await?;
            println!("account {account} disabled");
        }
        AccountCmd::Enable { account } => {
            users.set_account_disabled(&account, false).await?;
            println!("account {account} enabled");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readable_times() {
        assert_eq!(fmt_ms(None), "-");
        assert_eq!(fmt_ms(Some(0)), "1970-01-01 00:00:00 UTC");
        assert_eq!(fmt_ms(Some(1_795_402_149_000)), "2026-11-23 02:49:09 UTC");
        assert_eq!(fmt_ms(Some(951_782_400_000)), "2000-02-29 00:00:00 UTC");
    }
}
