//! Which resources changed: the extension announces each committed change
//! of a scope's files or an owner's graph on its channel
//! (`notify_channel()`); one connection of the server LISTENs there, from
//! the first time a client lists or subscribes to resources, and passes on
//! the URIs of the resources that changed.
//!
//! Each time LISTEN takes effect (the first time, and again after the
//! connection broke and was opened again), every resource is announced as
//! changed: whatever changed while nobody listened reaches the subscribers
//! that were already there.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{StreamExt, stream};
use serde_json::Value;
use tokio::sync::{OnceCell, broadcast};
use tokio_postgres::{AsyncMessage, NoTls};

use crate::options::Options;
use crate::resources::{self, Resource};

pub struct Changes {
    config: tokio_postgres::Config,
    options: Arc<Options>,
    /// The URIs of changed resources; started with the first subscriber.
    sender: OnceCell<broadcast::Sender<String>>,
}

impl Changes {
    pub fn new(config: tokio_postgres::Config, options: Arc<Options>) -> Changes {
        Changes {
            config,
            options,
            sender: OnceCell::new(),
        }
    }

    /// A receiver of the URIs of changed resources, starting the listening
    /// connection if it is not running yet.
    pub async fn subscribe(&self) -> broadcast::Receiver<String> {
        self.sender().await.subscribe()
    }

    /// Start the listening connection, so that a subscription that
    /// follows finds it listening.
    pub async fn start(&self) {
        if !resources::offered(&self.options).is_empty() {
            self.sender().await;
        }
    }

    async fn sender(&self) -> &broadcast::Sender<String> {
        self.sender
            .get_or_init(|| async {
                let (sender, _) = broadcast::channel(256);
                tokio::spawn(listen(
                    self.config.clone(),
                    self.options.clone(),
                    sender.clone(),
                ));
                sender
            })
            .await
    }
}

/// LISTEN on the extension's channel for as long as the server runs,
/// connecting again after any failure, at most every 30 seconds.
async fn listen(
    config: tokio_postgres::Config,
    options: Arc<Options>,
    sender: broadcast::Sender<String>,
) {
    let offered = resources::offered(&options);
    let mut pause = Duration::from_millis(500);
    loop {
        match listen_once(&config, &offered, &sender).await {
            Listened::Never(message) => {
                tracing::warn!("listening for changes: {message}; trying again in {pause:?}");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(30));
            }
            Listened::Until(message) => {
                tracing::warn!("listening for changes: {message}; connecting again");
                pause = Duration::from_millis(500);
            }
        }
    }
}

/// How one connection ended: before LISTEN took effect, or after.
enum Listened {
    Never(String),
    Until(String),
}

async fn listen_once(
    config: &tokio_postgres::Config,
    offered: &[Resource],
    sender: &broadcast::Sender<String>,
) -> Listened {
    let (client, mut connection) = match config.connect(NoTls).await {
        Ok(connected) => connected,
        Err(error) => return Listened::Never(error.to_string()),
    };
    let (messages, mut received) = tokio::sync::mpsc::unbounded_channel();
    let driver = tokio::spawn(async move {
        let mut stream = stream::poll_fn(move |context| connection.poll_message(context));
        while let Some(message) = stream.next().await {
            match message {
                Ok(AsyncMessage::Notification(notification)) => {
                    if messages.send(notification.payload().to_owned()).is_err() {
                        break;
                    }
                }
                Ok(_) => {}
                Err(error) => {
                    tracing::warn!("the listening connection failed: {error}");
                    break;
                }
            }
        }
    });
    let listening = async {
        let channel: String = client
            .query_one("SELECT agent_memory.notify_channel()", &[])
            .await?
            .get(0);
        client
            .batch_execute(&format!("LISTEN \"{}\"", channel.replace('"', "\"\"")))
            .await?;
        Ok::<_, tokio_postgres::Error>(channel)
    };
    let channel = match listening.await {
        Ok(channel) => channel,
        Err(error) => {
            driver.abort();
            return Listened::Never(error.to_string());
        }
    };
    tracing::info!("listening for changes on channel {channel}");
    for resource in offered {
        let _ = sender.send(resource.uri());
    }
    while let Some(payload) = received.recv().await {
        for uri in changed(offered, &payload) {
            let _ = sender.send(uri);
        }
    }
    driver.abort();
    Listened::Until("the connection ended".into())
}

/// The URIs of the offered resources a notification's payload names.
fn changed(offered: &[Resource], payload: &str) -> Vec<String> {
    let Ok(change) = serde_json::from_str::<Value>(payload) else {
        return Vec::new();
    };
    offered
        .iter()
        .filter(|resource| match (resource, change["kind"].as_str()) {
            (Resource::MemoryTree(scope), Some("files")) => change["scope"].as_str() == Some(scope),
            (Resource::GraphTree(owner), Some("graph")) => change["owner"].as_str() == Some(owner),
            _ => false,
        })
        .map(Resource::uri)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_names_only_the_offered_resource_of_its_scope_or_owner() {
        let offered = [
            Resource::MemoryTree("notes".into()),
            Resource::GraphTree("alice".into()),
        ];
        assert_eq!(
            changed(&offered, r#"{"kind": "files", "scope": "notes"}"#),
            ["memory://notes/tree"]
        );
        assert_eq!(
            changed(&offered, r#"{"kind": "graph", "owner": "alice"}"#),
            ["graph://alice/tree"]
        );
        assert!(changed(&offered, r#"{"kind": "files", "scope": "other"}"#).is_empty());
        assert!(changed(&offered, r#"{"kind": "graph", "owner": "notes"}"#).is_empty());
        // Working memory's changes name no resource of the server.
        assert!(
            changed(
                &offered,
                r#"{"session_id": "s", "node_id": null, "part": "task", "version": 1}"#
            )
            .is_empty()
        );
        assert!(changed(&offered, "not json").is_empty());
    }
}
