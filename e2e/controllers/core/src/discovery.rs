//! The API's served resources, as the garbage collector and the namespace controller need them:
//! one (preferred) version per kind, its scope and verbs.

use kube::Client;
use kube::discovery::{ApiResource, Discovery, Scope};

use crate::Error;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Served {
    pub ar: ApiResource,
    pub namespaced: bool,
    pub verbs: Vec<String>,
}

impl Served {
    pub fn supports(&self, verb: &str) -> bool {
        self.verbs.iter().any(|v| v == verb)
    }

    /// `resource.group` as upstream's messages print a GroupResource (`pods.`, `widgets.example.com`).
    pub fn group_resource(&self) -> String {
        format!("{}.{}", self.ar.plural, self.ar.group)
    }
}

/// Every served resource kind (preferred version), or a discovery error.
pub async fn served(client: &Client) -> Result<Vec<Served>, Error> {
    let discovery = Discovery::new(client.clone())
        .run()
        .await
        .map_err(|e| Error::Discovery(e.to_string()))?;
    let mut out = Vec::new();
    for group in discovery.groups() {
        for (ar, caps) in group.recommended_resources() {
            out.push(Served {
                ar,
                namespaced: caps.scope == Scope::Namespaced,
                verbs: caps.operations.clone(),
            });
        }
    }
    Ok(out)
}
