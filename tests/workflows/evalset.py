"""The labelled evaluation set for workflow matching, and synthetic catalogs for the bench.

``EVAL_CATALOG``: a hand-written catalog of 40 workflows from ordinary business domains,
served beside the built-in ones. ``EVAL_MESSAGES``: user messages labelled with the workflow
they should match (paraphrases that avoid the patterns' wording as much as a person would),
or ``None`` for off-topic messages that must match nothing.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from aptix.workflows.manifest import WorkflowManifest

# (id, title, description, patterns)
_CATALOG: list[tuple[str, str, str, list[str]]] = [
    (
        "submit_expense_report",
        "Submit an expense report",
        "Collects receipts and files an expense claim for reimbursement.",
        [
            "submit my expenses",
            "file an expense report",
            "get reimbursed for a business trip",
            "claim back what I spent",
        ],
    ),
    (
        "reset_password",
        "Reset a password",
        "Helps a user regain access to an account by resetting its password.",
        [
            "reset my password",
            "I forgot my password",
            "I am locked out of my account",
            "change my login password",
        ],
    ),
    (
        "onboard_employee",
        "Onboard a new employee",
        "Prepares accounts, equipment and a first-week plan for a new hire.",
        [
            "onboard a new employee",
            "a new hire starts on monday",
            "set up accounts for a new team member",
            "prepare the first week for a newcomer",
        ],
    ),
    (
        "schedule_meeting",
        "Schedule a meeting",
        "Finds a time that suits every attendee and sends the invitation.",
        [
            "schedule a meeting",
            "book a call with the team",
            "find a time for a meeting",
            "set up a meeting with a client",
        ],
    ),
    (
        "report_bug",
        "Report a bug",
        "Writes a reproducible bug report and files it in the tracker.",
        [
            "report a bug",
            "something is broken in the app",
            "file an issue for a crash",
            "the software has an error",
        ],
    ),
    (
        "review_code",
        "Review a pull request",
        "Reviews a code change for correctness, style and tests.",
        [
            "review my pull request",
            "look over this code change",
            "check my diff before merging",
            "code review please",
        ],
    ),
    (
        "deploy_service",
        "Deploy a service",
        "Releases a new build of a service to staging or production.",
        [
            "deploy the service",
            "ship this build to production",
            "roll out the new release",
            "push the latest version to staging",
        ],
    ),
    (
        "translate_document",
        "Translate a document",
        "Translates a document into another language, keeping its layout.",
        [
            "translate this document",
            "put this text into spanish",
            "I need a french version of this file",
            "translate the contract",
        ],
    ),
    (
        "summarise_article",
        "Summarise an article",
        "Produces a short summary of a long article or report.",
        [
            "summarise this article",
            "give me the gist of this report",
            "tl;dr of this text",
            "shorten this document into key points",
        ],
    ),
    (
        "book_travel",
        "Book business travel",
        "Books flights and hotels for a business trip within policy.",
        [
            "book a flight",
            "arrange travel for a conference",
            "reserve a hotel for my trip",
            "plan a business trip",
        ],
    ),
    (
        "order_supplies",
        "Order office supplies",
        "Orders stationery and office equipment from the approved vendor.",
        [
            "order office supplies",
            "we are out of printer paper",
            "buy new pens and notebooks",
            "restock the stationery cupboard",
        ],
    ),
    (
        "request_refund",
        "Request a refund",
        "Handles a customer's refund request for an order.",
        [
            "I want a refund",
            "return my order and get my money back",
            "refund a purchase",
            "the product arrived damaged",
        ],
    ),
    (
        "plan_sprint",
        "Plan a sprint",
        "Selects backlog items and sets the goal for the next sprint.",
        [
            "plan the next sprint",
            "sprint planning",
            "pick stories for the iteration",
            "set the sprint goal",
        ],
    ),
    (
        "write_release_notes",
        "Write release notes",
        "Drafts release notes from the changes merged since the last release.",
        [
            "write release notes",
            "draft the changelog",
            "what changed in this release",
            "prepare the notes for version two",
        ],
    ),
    (
        "analyse_sales",
        "Analyse sales figures",
        "Analyses sales data by region and period and explains the trends.",
        [
            "analyse our sales",
            "how did sales do last quarter",
            "break down revenue by region",
            "sales trends report",
        ],
    ),
    (
        "create_invoice",
        "Create an invoice",
        "Creates and sends an invoice to a customer.",
        [
            "create an invoice",
            "bill a customer",
            "send an invoice for the project",
            "invoice the client for march",
        ],
    ),
    (
        "request_time_off",
        "Request time off",
        "Files a leave request and checks the remaining holiday balance.",
        ["request time off", "book a holiday", "I need vacation days", "apply for leave next week"],
    ),
    (
        "draft_email",
        "Draft an email",
        "Writes an email to a given recipient in the right tone.",
        [
            "draft an email",
            "write a message to my manager",
            "compose a reply to this customer",
            "help me word an email",
        ],
    ),
    (
        "prepare_presentation",
        "Prepare a presentation",
        "Outlines and drafts slides for a talk or a meeting.",
        [
            "prepare a presentation",
            "make slides for the board meeting",
            "build a deck for my talk",
            "outline a slideshow",
        ],
    ),
    (
        "rotate_api_keys",
        "Rotate API keys",
        "Replaces API keys and secrets and updates the services that use them.",
        [
            "rotate the api keys",
            "our secret leaked",
            "renew credentials for the service",
            "replace the access tokens",
        ],
    ),
    (
        "backup_database",
        "Back up a database",
        "Takes a consistent backup of a database and verifies it.",
        [
            "back up the database",
            "take a snapshot of the db",
            "make a backup before the migration",
            "export the data for safekeeping",
        ],
    ),
    (
        "restore_database",
        "Restore a database",
        "Restores a database from a backup to a point in time.",
        [
            "restore the database",
            "roll the db back to yesterday",
            "recover lost data from a backup",
            "bring back the deleted records",
        ],
    ),
    (
        "investigate_incident",
        "Investigate a production incident",
        "Gathers logs and metrics and leads the response to an outage.",
        [
            "the site is down",
            "investigate an outage",
            "production incident",
            "users are seeing errors everywhere",
        ],
    ),
    (
        "write_postmortem",
        "Write a postmortem",
        "Writes a blameless postmortem after an incident with actions.",
        [
            "write a postmortem",
            "incident retrospective document",
            "what went wrong during the outage",
            "root cause analysis write-up",
        ],
    ),
    (
        "grant_access",
        "Grant system access",
        "Grants a colleague access to a system after approval.",
        [
            "give access to the repository",
            "grant permissions to a colleague",
            "add someone to the admin group",
            "I need access to the dashboard",
        ],
    ),
    (
        "revoke_access",
        "Revoke system access",
        "Removes a departing person's access to every system.",
        [
            "revoke access",
            "remove a user who left",
            "offboard an employee",
            "disable the account of a former colleague",
        ],
    ),
    (
        "create_survey",
        "Create a survey",
        "Builds a survey with questions and sends it to a group.",
        [
            "create a survey",
            "ask the team for feedback with a questionnaire",
            "build a poll",
            "send out a satisfaction survey",
        ],
    ),
    (
        "budget_forecast",
        "Forecast the budget",
        "Projects next year's budget from current spending.",
        [
            "forecast the budget",
            "project next year's spending",
            "how much will we spend next year",
            "financial forecast for the department",
        ],
    ),
    (
        "hire_candidate",
        "Hire a candidate",
        "Runs the hiring steps from job post to offer letter.",
        [
            "open a job position",
            "hire a developer",
            "post a job ad",
            "send an offer letter to a candidate",
        ],
    ),
    (
        "interview_feedback",
        "Record interview feedback",
        "Collects structured feedback after a job interview.",
        [
            "record interview feedback",
            "write up my notes on the candidate",
            "score the interview",
            "how did the interview go",
        ],
    ),
    (
        "update_documentation",
        "Update documentation",
        "Updates the product documentation to match a change.",
        [
            "update the docs",
            "the documentation is out of date",
            "document the new feature",
            "fix the readme",
        ],
    ),
    (
        "customer_complaint",
        "Handle a customer complaint",
        "Responds to an unhappy customer and resolves the complaint.",
        [
            "handle a complaint",
            "an angry customer called",
            "a client is unhappy with our service",
            "respond to negative feedback",
        ],
    ),
    (
        "inventory_check",
        "Check inventory",
        "Counts stock levels and flags items that need reordering.",
        [
            "check the inventory",
            "how many units are in stock",
            "stock count",
            "which items are running low",
        ],
    ),
    (
        "renew_contract",
        "Renew a contract",
        "Reviews and renews a supplier or customer contract before it expires.",
        [
            "renew the contract",
            "the agreement expires next month",
            "extend the supplier deal",
            "contract renewal",
        ],
    ),
    (
        "security_review",
        "Run a security review",
        "Reviews a design or system for security risks.",
        [
            "security review",
            "check this design for vulnerabilities",
            "threat model the new feature",
            "is this system secure",
        ],
    ),
    (
        "performance_review",
        "Write a performance review",
        "Prepares an employee's yearly performance review.",
        [
            "write a performance review",
            "annual appraisal for my report",
            "evaluate an employee's year",
            "prepare feedback for a review cycle",
        ],
    ),
    (
        "plan_event",
        "Plan a team event",
        "Organises a team offsite or social event.",
        [
            "plan a team event",
            "organise an offsite",
            "arrange a team dinner",
            "set up a party for the office",
        ],
    ),
    (
        "migrate_data",
        "Migrate data",
        "Moves data between systems with a checked mapping.",
        [
            "migrate the data",
            "move records to the new crm",
            "transfer our data to another system",
            "data migration plan",
        ],
    ),
    (
        "tax_filing",
        "Prepare a tax filing",
        "Gathers figures and prepares the quarterly tax return.",
        ["prepare the tax return", "file our taxes", "quarterly vat filing", "tax declaration"],
    ),
    (
        "social_media_post",
        "Write a social media post",
        "Writes and schedules a post for the company's social channels.",
        [
            "write a tweet",
            "post on linkedin about our launch",
            "schedule a social media post",
            "announce the news on our channels",
        ],
    ),
]

# Messages labelled with the expected workflow (None: off-topic, must match nothing).
EVAL_MESSAGES: list[tuple[str, str | None]] = [
    # built-in workflows
    ("I'd like to write a new workflow for onboarding", "author_workflow"),
    ("can we define a new process for handling returns as a workflow", "author_workflow"),
    ("help me create a workflow", "author_workflow"),
    ("I want to author a brand new workflow", "author_workflow"),
    ("let's draft a workflow that covers vendor reviews", "author_workflow"),
    ("publish the workflow draft I finished", "review_and_publish_workflow"),
    ("review my draft workflow and make it live", "review_and_publish_workflow"),
    ("release version 2 of the approval workflow", "review_and_publish_workflow"),
    ("the draft is done, please publish it", "review_and_publish_workflow"),
    ("approve and release my workflow", "review_and_publish_workflow"),
    ("which mode fits what I'm doing", "choose_mode"),
    ("switch modes please", "choose_mode"),
    ("change to a different mode", "choose_mode"),
    ("what modes do you have", "choose_mode"),
    ("I need a different mode", "choose_mode"),
    ("help me calculate my monthly costs", "guided_calculation"),
    ("can you work out this maths problem step by step", "guided_calculation"),
    ("compute the total of these amounts", "guided_calculation"),
    ("do the arithmetic for my budget", "guided_calculation"),
    ("calculate 15% of 2400 plus 80", "guided_calculation"),
    ("hello!", "greet_user"),
    ("hi there, introduce yourself", "greet_user"),
    ("what can you do?", "greet_user"),
    ("I'm new here, what is this", "greet_user"),
    ("say hello", "greet_user"),
    # explicit initiation
    ("use workflow: workflow_diagnostics", "workflow_diagnostics"),
    ("Start the guided-calculation workflow.", "guided_calculation"),
    ("use workflow: plan_sprint", "plan_sprint"),
    ("please start the reset password workflow", "reset_password"),
    # synthetic catalog paraphrases
    ("I need to get reimbursed for my taxi receipts", "submit_expense_report"),
    ("file my travel expenses", "submit_expense_report"),
    ("I can't log in, I forgot my password", "reset_password"),
    ("reset the password on my account", "reset_password"),
    ("we have a new hire starting next week", "onboard_employee"),
    ("onboarding for a new team member", "onboard_employee"),
    ("set up a meeting with the marketing team", "schedule_meeting"),
    ("find a slot for a call with the client", "schedule_meeting"),
    ("the app crashes when I upload a file, report it", "report_bug"),
    ("file a bug about the broken login page", "report_bug"),
    ("please review my pull request", "review_code"),
    ("can you look over my code changes", "review_code"),
    ("deploy the new build to production", "deploy_service"),
    ("roll out the latest release to staging", "deploy_service"),
    ("translate this contract into german", "translate_document"),
    ("I need this document in french", "translate_document"),
    ("summarise this long report for me", "summarise_article"),
    ("give me the key points of this article", "summarise_article"),
    ("book flights and a hotel for the conference", "book_travel"),
    ("plan my business trip to berlin", "book_travel"),
    ("we ran out of printer paper, order more", "order_supplies"),
    ("order new notebooks and pens for the office", "order_supplies"),
    ("my order arrived broken and I want my money back", "request_refund"),
    ("refund this purchase please", "request_refund"),
    ("let's plan the next sprint", "plan_sprint"),
    ("choose stories for the next iteration", "plan_sprint"),
    ("write the release notes for this version", "write_release_notes"),
    ("draft a changelog for the release", "write_release_notes"),
    ("how did our sales do last quarter", "analyse_sales"),
    ("break down the revenue by region", "analyse_sales"),
    ("invoice the client for the work in march", "create_invoice"),
    ("create an invoice for the acme project", "create_invoice"),
    ("I want to take vacation days next month", "request_time_off"),
    ("request leave for friday", "request_time_off"),
    ("write an email to my manager about the delay", "draft_email"),
    ("compose a reply to this customer email", "draft_email"),
    ("make slides for the quarterly board meeting", "prepare_presentation"),
    ("prepare a presentation about our roadmap", "prepare_presentation"),
    ("our api secret was leaked, rotate the keys", "rotate_api_keys"),
    ("renew the access tokens for the payment service", "rotate_api_keys"),
    ("take a backup of the database before the upgrade", "backup_database"),
    ("snapshot the db", "backup_database"),
    ("restore the database from last night's backup", "restore_database"),
    ("recover the records that were deleted yesterday", "restore_database"),
    ("the website is down and users see errors", "investigate_incident"),
    ("investigate the outage in production", "investigate_incident"),
    ("write a postmortem for yesterday's outage", "write_postmortem"),
    ("do a root cause analysis write-up of the incident", "write_postmortem"),
    ("give my colleague access to the repository", "grant_access"),
    ("grant admin permissions to anna", "grant_access"),
    ("remove access for a user who left the company", "revoke_access"),
    ("offboard john, he left last week", "revoke_access"),
    ("send a feedback questionnaire to the team", "create_survey"),
    ("create a satisfaction survey for customers", "create_survey"),
    ("project our spending for next year", "budget_forecast"),
    ("make a budget forecast for the department", "budget_forecast"),
    ("we want to hire a backend developer", "hire_candidate"),
    ("post a job ad for a designer", "hire_candidate"),
    ("write up my interview notes on the candidate", "interview_feedback"),
    ("score today's interview", "interview_feedback"),
    ("the documentation is outdated, update it", "update_documentation"),
    ("document the new export feature", "update_documentation"),
    ("an angry customer complained about the delivery", "customer_complaint"),
    ("respond to this negative customer feedback", "customer_complaint"),
    ("how many units do we have in stock", "inventory_check"),
    ("check which items are running low in the warehouse", "inventory_check"),
    ("our supplier agreement expires next month, renew it", "renew_contract"),
    ("extend the contract with the cleaning company", "renew_contract"),
    ("threat model the new login flow", "security_review"),
    ("check this architecture for security vulnerabilities", "security_review"),
    ("prepare the annual performance review for my report", "performance_review"),
    ("write an appraisal of my employee's year", "performance_review"),
    ("organise a team offsite in june", "plan_event"),
    ("arrange a dinner for the whole team", "plan_event"),
    ("move our customer records to the new crm", "migrate_data"),
    ("plan the data migration to the new system", "migrate_data"),
    ("prepare the quarterly vat return", "tax_filing"),
    ("file the company's taxes", "tax_filing"),
    ("post about our product launch on linkedin", "social_media_post"),
    ("write a tweet announcing the new office", "social_media_post"),
    # off-topic: nothing should match
    ("what time is it", None),
    ("tell me a joke", None),
    ("what's the weather like in paris", None),
    ("who won the football match yesterday", None),
    ("what is the capital of australia", None),
    ("thanks, that's all", None),
    ("how tall is mount everest", None),
    ("recommend a good novel", None),
    ("what does photosynthesis mean", None),
    ("sing me a song", None),
    ("how do I cook rice", None),
    ("what's your favourite colour", None),
    ("explain quantum entanglement simply", None),
    ("is it going to rain tomorrow", None),
    ("who painted the mona lisa", None),
    ("ok", None),
    ("good morning, how are you feeling today", None),
    ("what is the meaning of life", None),
    ("translate 'cat' into italian in one word, no document", None),
    ("how many legs does a spider have", None),
]


def eval_catalog() -> list[WorkflowManifest]:
    """The hand-written catalog as manifests (served beside the built-in workflows)."""
    return [
        _manifest(wid, title, description, patterns)
        for wid, title, description, patterns in _CATALOG
    ]


def _manifest(wid: str, title: str, description: str, patterns: list[str]) -> WorkflowManifest:
    return WorkflowManifest(
        workflow_id=wid,
        title=title,
        description=description,
        user_intent_patterns=tuple(patterns),
        instruction_text=f"1. Ask the user for what {title.lower()} needs.\n2. Do it.",
        completion_criteria=("The user confirmed the result.",),
        version="1.0.0",
    )


_VERBS = [
    "create",
    "review",
    "update",
    "archive",
    "approve",
    "schedule",
    "audit",
    "export",
    "import",
    "cancel",
    "renew",
    "assign",
    "summarise",
    "forecast",
    "validate",
    "publish",
    "migrate",
    "reconcile",
    "escalate",
    "close",
    "plan",
    "track",
    "estimate",
    "verify",
]
_OBJECTS = [
    "invoice",
    "contract",
    "purchase order",
    "ticket",
    "report",
    "budget",
    "shipment",
    "campaign",
    "timesheet",
    "payroll run",
    "license",
    "vendor",
    "asset",
    "policy",
    "roadmap",
    "backlog",
    "lead",
    "quote",
    "claim",
    "certificate",
    "dataset",
    "server",
    "release",
    "survey",
    "training plan",
    "warranty",
    "subscription",
    "permit",
]
_QUALIFIERS = [
    "for the sales team",
    "for a customer",
    "for finance",
    "for the warehouse",
    "for the board",
    "for a supplier",
    "for engineering",
    "for legal",
    "for hr",
    "for marketing",
    "for the support desk",
    "for procurement",
    "for a partner",
    "for the north region",
    "for the south region",
    "for an audit",
    "for q1",
    "for q2",
    "for q3",
    "for q4",
]


#: How many distinct workflows :func:`synthetic_catalog` can make.
SYNTHETIC_LIMIT = len(_VERBS) * len(_OBJECTS) * len(_QUALIFIERS)


def synthetic_catalog(size: int, seed: int = 7) -> list[WorkflowManifest]:
    """``size`` distinct generated workflows (verb × object × qualifier) for the bench."""
    rng = random.Random(seed)
    combos = [(v, o, q) for v in _VERBS for o in _OBJECTS for q in _QUALIFIERS]
    rng.shuffle(combos)
    if size > SYNTHETIC_LIMIT:
        raise ValueError(f"at most {SYNTHETIC_LIMIT} synthetic workflows")
    out = []
    for i, (verb, obj, qualifier) in enumerate(combos[:size]):
        wid = f"syn_{i:05d}_{verb}_{obj.replace(' ', '_')}"
        patterns = [
            f"{verb} a {obj} {qualifier}",
            f"I need to {verb} the {obj}",
            f"help me {verb} {obj}s {qualifier}",
        ]
        out.append(
            _manifest(
                wid,
                f"{verb.capitalize()} a {obj} {qualifier}",
                f"Guides the user to {verb} a {obj} {qualifier}.",
                patterns,
            )
        )
    return out


def synthetic_messages(catalog: list[WorkflowManifest], count: int, seed: int = 11) -> list[str]:
    """Distinct user messages aimed at random workflows of a synthetic catalog."""
    rng = random.Random(seed)
    # Two openers say "workflow": such messages are also searched for an explicitly named id,
    # which must not cost a pass over the catalog.
    openers = [
        "please",
        "could you",
        "I would like to",
        "can you help me",
        "we need to",
        "start the workflow to",
        "is there a workflow to",
    ]
    messages = []
    for i in range(count):
        target = rng.choice(catalog)
        title = target.title.lower()
        messages.append(f"{rng.choice(openers)} {title} ({i})")
    return messages


class EvalReport:
    """Top-1 / top-3 accuracy on labelled messages and rejection of off-topic ones."""

    def __init__(self) -> None:
        self.on_topic = 0
        self.top1 = 0
        self.top3 = 0
        self.off_topic = 0
        self.rejected = 0
        self.misses: list[tuple[str, str | None, list[str]]] = []

    @property
    def top1_accuracy(self) -> float:
        return self.top1 / self.on_topic

    @property
    def top3_accuracy(self) -> float:
        return self.top3 / self.on_topic

    @property
    def rejection_rate(self) -> float:
        return self.rejected / self.off_topic


def evaluate(match: Callable[[str], list[str]]) -> EvalReport:
    """Run every labelled message through ``match`` (message -> ranked workflow ids)."""
    report = EvalReport()
    for message, expected in EVAL_MESSAGES:
        ranked = match(message)
        if expected is None:
            report.off_topic += 1
            report.rejected += not ranked
            if ranked:
                report.misses.append((message, expected, ranked[:3]))
            continue
        report.on_topic += 1
        report.top1 += bool(ranked) and ranked[0] == expected
        report.top3 += expected in ranked[:3]
        if not ranked or ranked[0] != expected:
            report.misses.append((message, expected, ranked[:3]))
    return report
