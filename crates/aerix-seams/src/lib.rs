//! The seams of the turn loop that need nothing of it: what it asks of the user (the plan gate,
//! a hook's or a rule's ask), whether a call may run (`Permissions`), the agent definitions it
//! delegates to, the skills a `skill` call loads and the external (MCP) tools. `aerix-core` re-exports them; the binary
//! implements them over `aerix-tui`, `aerix-permissions`, `aerix-config` and `aerix-skills`.

mod definitions;
mod external;
mod gates;
mod permissions;
mod skills;

pub use definitions::{Definition, Definitions, NO_DEFINITIONS, NoDefinitions};
pub use external::{Called, ExternalTools, NO_EXTERNAL_TOOLS, NoExternalTools};
pub use gates::{
    ACCEPT_PLANS, AcceptPlans, Answering, AskAnswer, AskGate, DENY_ASKS, DenyAsks, PlanDecision,
    PlanGate,
};
pub use permissions::{ALLOW_ALL, AllowAll, Asked, Held, Permission, Permissions};
pub use skills::{NO_SKILLS, NoSkills, Skills, offer_skill};
