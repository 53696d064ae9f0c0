//! RBAC authorization: [`authorize`] a request against the RBAC objects the caller stored, with
//! the exact 403 text of kube-apiserver; and [`bootstrap_policy`], the default roles to create.

mod authorize;
mod bootstrap;
mod policy;

pub use authorize::{
    Attributes, Decision, Forbidden, Request, ResourceRequest, SYSTEM_MASTERS, authorize,
};
pub use bootstrap::bootstrap_policy;
pub use policy::RbacPolicy;
