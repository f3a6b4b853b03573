//! Which resources changed: the extension announces each committed change
//! of a scope's files or an owner's graph on its channel
//! (`notify_channel()`); while some client is subscribed, one connection
//! of the server LISTENs there and passes on the URIs of the resources
//! that changed. With no subscriber left it closes: a listener makes every
//! writer of the cluster send its notifications, which costs their
//! commits, so nobody listens for nothing.
//!
//! Each time LISTEN takes effect (for the first subscriber, and again
//! after the connection broke or closed), every resource is announced as
//! changed: whatever changed while nobody listened, or between a
//! subscription and its LISTEN, reaches the subscribers.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{StreamExt, stream};
use serde_json::Value;
use tokio::sync::{Notify, broadcast};
use tokio_postgres::{AsyncMessage, NoTls};

use crate::options::Options;
use crate::resources::{self, Resource};

pub struct Changes {
    shared: Arc<Shared>,
}

/// What the listening task and the subscribers share.
struct Shared {
    config: tokio_postgres::Config,
    offered: Vec<Resource>,
    /// The URIs of changed resources, to every subscriber.
    sender: broadcast::Sender<String>,
    /// Wakes the listening task when a subscriber comes.
    subscribed: Notify,
}

impl Changes {
    /// The changes of the resources `options` offer; the listening task
    /// starts now and waits for a subscriber.
    pub fn new(config: tokio_postgres::Config, options: &Options) -> Changes {
        let shared = Arc::new(Shared {
            config,
            offered: resources::offered(options),
            sender: broadcast::channel(256).0,
            subscribed: Notify::new(),
        });
        tokio::spawn(listen(shared.clone()));
        Changes { shared }
    }

    /// A receiver of the URIs of changed resources; the listening
    /// connection opens if it is not open yet.
    pub fn subscribe(&self) -> broadcast::Receiver<String> {
        let receiver = self.shared.sender.subscribe();
        self.shared.subscribed.notify_one();
        receiver
    }
}

/// LISTEN on the extension's channel while there are subscribers,
/// connecting again after any failure, at most every 30 seconds.
async fn listen(shared: Arc<Shared>) {
    let mut pause = Duration::from_millis(500);
    loop {
        while shared.sender.receiver_count() == 0 {
            shared.subscribed.notified().await;
        }
        match listen_once(&shared).await {
            Listened::Never(message) => {
                tracing::warn!("listening for changes: {message}; trying again in {pause:?}");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(30));
            }
            Listened::Until(message) => {
                tracing::info!("listening for changes: {message}");
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

async fn listen_once(shared: &Shared) -> Listened {
    let (client, mut connection) = match shared.config.connect(NoTls).await {
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
        let channel: String =
            client.query_one("SELECT agent_memory.notify_channel()", &[]).await?.get(0);
        client.batch_execute(&format!("LISTEN \"{}\"", channel.replace('"', "\"\""))).await?;
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
    for resource in &shared.offered {
        let _ = shared.sender.send(resource.uri());
    }
    // Subscribers leave by dropping their receivers: look each second.
    let mut look = tokio::time::interval(Duration::from_secs(1));
    let ended = loop {
        tokio::select! {
            payload = received.recv() => match payload {
                Some(payload) => {
                    for uri in changed(&shared.offered, &payload) {
                        let _ = shared.sender.send(uri);
                    }
                }
                None => break "the connection ended",
            },
            _ = look.tick() => {
                if shared.sender.receiver_count() == 0 {
                    break "no subscriber left; closed";
                }
            }
        }
    };
    driver.abort();
    Listened::Until(ended.into())
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
        let offered = [Resource::MemoryTree("notes".into()), Resource::GraphTree("alice".into())];
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
