/**
 * Generated from docs/openapi.json by `npm run openapi` (openapi-typescript); do not edit.
 * Types only: the SDK imports them with `import type`, so it stays dependency-free at run time.
 */

export type paths = {
    "/agp/discover": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** A business's capabilities */
        post: {
            parameters: {
                query?: never;
                header?: never;
                path?: never;
                cookie?: never;
            };
            requestBody: {
                content: {
                    "application/json": {
                        /** @description A business from the `businesses:` config section */
                        businessId: string;
                    };
                };
            };
            responses: {
                /** @description Refused; `error.code` says why and nothing changed */
                "4XX": {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["AgpError"];
                    };
                };
                /** @description Failed on twokey's side; `error.code` says why (`execution_failed`: the side effect failed, the token stays valid) */
                "5XX": {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["AgpError"];
                    };
                };
                /** @description OK */
                200: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["AgpEnvelope"];
                    };
                };
            };
        };
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agp/execute": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Step 2 of the Execute Handoff: the same request, with the token */
        post: {
            parameters: {
                query?: never;
                header?: {
                    /** @description A retry with the same key gets the first answer back */
                    "idempotency-key"?: string;
                    /** @description The token from POST /agp/execute/prepare */
                    "x-confirmation-token"?: string;
                };
                path?: never;
                cookie?: never;
            };
            requestBody: {
                content: {
                    "application/json": {
                        /** @description A business from the `businesses:` config section */
                        businessId: string;
                        /** @description The AGP request; the business's adapter reads it */
                        request: {
                            [key: string]: unknown;
                        };
                    };
                };
            };
            responses: {
                /** @description Refused; `error.code` says why and nothing changed */
                "4XX": {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["AgpError"];
                    };
                };
                /** @description Failed on twokey's side; `error.code` says why (`execution_failed`: the side effect failed, the token stays valid) */
                "5XX": {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["AgpError"];
                    };
                };
                /** @description OK */
                200: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["AgpEnvelope"];
                    };
                };
            };
        };
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agp/execute/prepare": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Step 1 of the Execute Handoff: a confirmation token for exactly this request
         * @description When the business needs a human, the answer names the proposal to follow; the token works once it is approved.
         */
        post: {
            parameters: {
                query?: never;
                header?: never;
                path?: never;
                cookie?: never;
            };
            requestBody: {
                content: {
                    "application/json": {
                        /** @description A business from the `businesses:` config section */
                        businessId: string;
                        /** @description The AGP request; the business's adapter reads it */
                        request: {
                            [key: string]: unknown;
                        };
                    };
                };
            };
            responses: {
                /** @description Refused; `error.code` says why and nothing changed */
                "4XX": {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["AgpError"];
                    };
                };
                /** @description Failed on twokey's side; `error.code` says why (`execution_failed`: the side effect failed, the token stays valid) */
                "5XX": {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["AgpError"];
                    };
                };
                /** @description OK */
                200: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["AgpPrepareAnswer"];
                    };
                };
            };
        };
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/agp/query": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** A read-only question to a business */
        post: {
            parameters: {
                query?: never;
                header?: never;
                path?: never;
                cookie?: never;
            };
            requestBody: {
                content: {
                    "application/json": {
                        /** @description A business from the `businesses:` config section */
                        businessId: string;
                        /** @description The AGP request; the business's adapter reads it */
                        request: {
                            [key: string]: unknown;
                        };
                    };
                };
            };
            responses: {
                /** @description Refused; `error.code` says why and nothing changed */
                "4XX": {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["AgpError"];
                    };
                };
                /** @description Failed on twokey's side; `error.code` says why (`execution_failed`: the side effect failed, the token stays valid) */
                "5XX": {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["AgpError"];
                    };
                };
                /** @description OK */
                200: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["AgpEnvelope"];
                    };
                };
            };
        };
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/discord/interactions": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Discord's interactions endpoint
         * @description Button clicks and pings from Discord, verified with Ed25519 against DISCORD_PUBLIC_KEY before they are read; a bad signature is `401 unauthorized` (Discord probes with bad ones on purpose). A click that decides is stored before its response; when it cannot be, the response is an ephemeral message saying twokey cannot reach its database. Only with DISCORD_PUBLIC_KEY.
         */
        post: {
            parameters: {
                query?: never;
                header?: {
                    /** @description Hex Ed25519 signature of timestamp + body */
                    "x-signature-ed25519"?: string;
                    "x-signature-timestamp"?: string;
                };
                path?: never;
                cookie?: never;
            };
            /** @description A Discord interaction, checked against its signature byte for byte before it is read */
            requestBody: {
                content: {
                    "application/json": unknown;
                };
            };
            responses: {
                /** @description Refused; `error.code` says why and nothing changed */
                "4XX": {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description The interaction response (pong, deferred update, ephemeral message) */
                200: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": unknown;
                    };
                };
            };
        };
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/healthz": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Liveness: the process answers */
        get: {
            parameters: {
                query?: never;
                header?: never;
                path?: never;
                cookie?: never;
            };
            requestBody?: never;
            responses: {
                /** @description OK */
                200: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": {
                            /** @enum {string} */
                            status: "ok";
                        };
                    };
                };
            };
        };
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/metrics": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Prometheus metrics */
        get: {
            parameters: {
                query?: never;
                header?: never;
                path?: never;
                cookie?: never;
            };
            requestBody?: never;
            responses: {
                /** @description Prometheus text exposition format */
                200: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "text/plain": string;
                    };
                };
            };
        };
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/readyz": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Readiness: the database commits a write within 2 s */
        get: {
            parameters: {
                query?: never;
                header?: never;
                path?: never;
                cookie?: never;
            };
            requestBody?: never;
            responses: {
                /** @description OK */
                200: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": {
                            /** @enum {string} */
                            status: "ready";
                        };
                    };
                };
                /** @description Not ready */
                503: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": {
                            reason: string;
                            /** @enum {string} */
                            status: "not_ready";
                        };
                    };
                };
            };
        };
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/slack/events": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Slack's interactivity and events callback
         * @description Answered by Bolt: `200` with its acknowledgement (a `url_verification` challenge is echoed), `401` with no body when the signature or its timestamp (±5 minutes) does not match, `400` with no body for a payload Slack never sends. A click that decides (Approve, Retry, a submitted form) is stored before the `200`; when it cannot be, the clicker is told privately that twokey cannot reach its database. Only with SLACK_BOT_TOKEN and SLACK_SIGNING_SECRET (HTTP mode).
         */
        post: {
            parameters: {
                query?: never;
                header?: {
                    /** @description Unix seconds */
                    "x-slack-request-timestamp"?: string;
                    "x-slack-retry-num"?: string;
                    "x-slack-retry-reason"?: string;
                    /** @description v0=HMAC-SHA256 of v0:timestamp:body with the signing secret */
                    "x-slack-signature"?: string;
                };
                path?: never;
                cookie?: never;
            };
            /** @description Slack's payload (`payload=…` form or JSON event), checked against `X-Slack-Signature` byte for byte before it is read */
            requestBody: {
                content: {
                    "application/json": unknown;
                    "application/x-www-form-urlencoded": unknown;
                };
            };
            responses: {
                /** @description Bolt's acknowledgement, often empty */
                200: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": unknown;
                    };
                };
            };
        };
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/teams/messages": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Microsoft Teams' messaging endpoint (Bot Framework activities)
         * @description Activities from the Bot Framework channel. Each carries a JWT (`Authorization: Bearer`, RS256) that must be signed by a key of the channel's OpenID metadata (TEAMS_OPENID_METADATA_URL), issued by its issuer, for TEAMS_APP_ID, with a `serviceUrl` claim equal to the activity's; otherwise `401` with no body and nothing is read. An approval card's button (`invoke` named `adaptiveCard/action`) is stored before its invoke response, which tells the clicker the outcome, a refusal, or that twokey cannot reach its database. Other activities are acknowledged with an empty `200`. Only with TEAMS_APP_ID and TEAMS_APP_PASSWORD.
         */
        post: {
            parameters: {
                query?: never;
                header?: {
                    /** @description Bearer JWT from the Bot Framework channel */
                    authorization?: string;
                };
                path?: never;
                cookie?: never;
            };
            /** @description A Bot Framework activity, read only once its token checks out */
            requestBody: {
                content: {
                    "application/json": unknown;
                };
            };
            responses: {
                /** @description Refused; `error.code` says why and nothing changed */
                "4XX": {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description An invoke response (statusCode, type, value), or empty */
                200: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": unknown;
                    };
                };
            };
        };
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/operations": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The operations this agent may propose */
        get: {
            parameters: {
                query?: never;
                header?: never;
                path?: never;
                cookie?: never;
            };
            requestBody?: never;
            responses: {
                /** @description Refused; `error.code` says why and nothing changed */
                "4XX": {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description Failed on twokey's side; `error.code` says why (`execution_failed`: the side effect failed, the token stays valid) */
                "5XX": {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description OK */
                200: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": {
                            operations: components["schemas"]["OperationInfo"][];
                        };
                    };
                };
            };
        };
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/proposals": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Propose an operation
         * @description twokey writes the summary, mints a single-use confirmation token bound to this agent, the operation and the canonical params, and asks the approvers. With `reuse: true`, a request with the same identity (agent, operation, canonical params, conversation) that still answers is returned with 200 instead.
         */
        post: {
            parameters: {
                query?: never;
                header?: {
                    /** @description A retry with the same key gets the first answer back */
                    "idempotency-key"?: string;
                };
                path?: never;
                cookie?: never;
            };
            requestBody: {
                content: {
                    "application/json": {
                        /** @description Receives the decision and the result, signed (Standard Webhooks) */
                        callbackUrl?: string;
                        /** @description With `reuse`: the conversation, thread or run the call belongs to; the same call in another conversation is another request */
                        conversation?: string;
                        operation: string;
                        /** @description Checked against the operation's params schema (400 invalid_params lists every error) */
                        params: {
                            [key: string]: unknown;
                        };
                        /** @description true: when this agent already has a request with the same operation, canonical params and conversation that still answers (open, or decided and not yet seen), answer it with 200 instead of asking again */
                        reuse?: boolean;
                    };
                };
            };
            responses: {
                /** @description Refused; `error.code` says why and nothing changed */
                "4XX": {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description Failed on twokey's side; `error.code` says why (`execution_failed`: the side effect failed, the token stays valid) */
                "5XX": {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description The open (or not yet seen) request with the same identity, answered instead of a new one (200) */
                200: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["ProposalReused"];
                    };
                };
                /** @description Created */
                201: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["ProposalCreated"];
                    };
                };
            };
        };
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/proposals/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * A proposal, without its token
         * @description With `wait`, long-polls until the proposal changes. Another agent's proposal is 404.
         */
        get: {
            parameters: {
                query?: {
                    /** @description With `wait`: what the client last saw, as `<status>:<number of approvals>`. A proposal that differs from it answers at once; one that matches is held until it changes */
                    seen?: string;
                    /** @description Long-poll: hold the answer up to this many seconds (at most 60) until the proposal changes */
                    wait?: string;
                };
                header?: never;
                path: {
                    id: string;
                };
                cookie?: never;
            };
            requestBody?: never;
            responses: {
                /** @description Refused; `error.code` says why and nothing changed */
                "4XX": {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description Failed on twokey's side; `error.code` says why (`execution_failed`: the side effect failed, the token stays valid) */
                "5XX": {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description A proposal as its agent sees it; never the confirmation token */
                200: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["ProposalView"];
                    };
                };
            };
        };
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/proposals/{id}/cancel": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Withdraw a pending proposal */
        post: {
            parameters: {
                query?: never;
                header?: {
                    /** @description A retry with the same key gets the first answer back */
                    "idempotency-key"?: string;
                };
                path: {
                    id: string;
                };
                cookie?: never;
            };
            requestBody?: never;
            responses: {
                /** @description Refused; `error.code` says why and nothing changed */
                "4XX": {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description Failed on twokey's side; `error.code` says why (`execution_failed`: the side effect failed, the token stays valid) */
                "5XX": {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description A proposal as its agent sees it; never the confirmation token */
                200: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["ProposalView"];
                    };
                };
            };
        };
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/proposals/{id}/commit": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Commit an approved `commit: agent` proposal
         * @description Checks, in order: invalid_token, principal_mismatch, consumed, expired, operation_mismatch, params_mismatch, rejected / not_approved. 502 execution_failed leaves the token valid: retry. A commit that already happened, asked again by the same agent with the same token, operation and params, answers 200 with its stored result, `replayed: true` and `Idempotent-Replayed: true`; any other use of a consumed token is `consumed`.
         */
        post: {
            parameters: {
                query?: never;
                header?: {
                    /** @description A retry with the same key gets the first answer back */
                    "idempotency-key"?: string;
                    /** @description tk_conf_… from the 201 of POST /v1/proposals */
                    "x-confirmation-token"?: string;
                };
                path: {
                    id: string;
                };
                cookie?: never;
            };
            requestBody: {
                content: {
                    "application/json": {
                        operation: string;
                        /** @description Checked against the operation's params schema (400 invalid_params lists every error) */
                        params: {
                            [key: string]: unknown;
                        };
                    };
                };
            };
            responses: {
                /** @description Refused; `error.code` says why and nothing changed */
                "4XX": {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description Failed on twokey's side; `error.code` says why (`execution_failed`: the side effect failed, the token stays valid) */
                "5XX": {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description OK */
                200: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["CommitAnswer"];
                    };
                };
            };
        };
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/proposals/{id}/resume-state": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Read back the parked resume state (only with the API key that parked it) */
        get: {
            parameters: {
                query?: never;
                header?: never;
                path: {
                    id: string;
                };
                cookie?: never;
            };
            requestBody?: never;
            responses: {
                /** @description Refused; `error.code` says why and nothing changed */
                "4XX": {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description Failed on twokey's side; `error.code` says why (`execution_failed`: the side effect failed, the token stays valid) */
                "5XX": {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description OK */
                200: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["ResumeState"];
                    };
                };
            };
        };
        /** Park what the agent needs to resume a paused run beside its proposal */
        put: {
            parameters: {
                query?: never;
                header?: never;
                path: {
                    id: string;
                };
                cookie?: never;
            };
            requestBody: {
                content: {
                    "application/json": {
                        /** @description What the agent needs to resume its run; sealed at rest under its API key */
                        state: string;
                    };
                };
            };
            responses: {
                /** @description Refused; `error.code` says why and nothing changed */
                "4XX": {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description Failed on twokey's side; `error.code` says why (`execution_failed`: the side effect failed, the token stays valid) */
                "5XX": {
                    headers: {
                        [name: string]: unknown;
                    };
                    content: {
                        "application/json": components["schemas"]["Error"];
                    };
                };
                /** @description Stored */
                204: {
                    headers: {
                        [name: string]: unknown;
                    };
                    content?: never;
                };
            };
        };
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
};
export type webhooks = Record<string, never>;
export type components = {
    schemas: {
        AgpEnvelope: {
            businessId: string;
            /** @description What the business answered; for execute, `{ status: 'succeeded' | 'pending_confirmation' | 'completed' | 'error' | 'failed', … }` */
            data: unknown;
            /** @enum {string} */
            operation: "discover" | "query" | "execute";
            /**
             * @description Present when this execute had already run (the same agent, token and request): the stored answer, nothing run again; the header `Idempotent-Replayed: true` says the same
             * @constant
             */
            replayed?: true;
            /** @constant */
            status: "succeeded";
            transactionId: string;
        };
        /** @description Every failure of the AGP routes */
        AgpError: {
            error: {
                /**
                 * @description Stable machine-readable code; the message is for humans
                 * @enum {string}
                 */
                code: "invalid_request" | "invalid_json" | "invalid_params" | "unauthorized" | "operation_not_allowed" | "not_an_approver" | "owner_cannot_approve" | "step_up_required" | "step_up_failed" | "invalid_token" | "consumed" | "expired" | "principal_mismatch" | "operation_mismatch" | "params_mismatch" | "rejected" | "not_approved" | "not_found" | "unknown_operation" | "not_pending" | "nothing_to_retry" | "operation_removed" | "conflict" | "idempotency_key_reused" | "payload_too_large" | "rate_limited" | "internal" | "execution_failed" | "unavailable" | "database_unavailable" | "insufficient_storage";
                /** @description Every schema error, on a 400 */
                details?: components["schemas"]["ErrorDetail"][];
                message: string;
                /** @description Also in the server log line of this request */
                requestId: string;
            };
            /** @description The error's message again, where the AGP reference SDK reads it */
            message: string;
        };
        AgpPrepareAnswer: {
            /** @description Where a human (or a policy rule) decides: pending, or already decided at prepare */
            approval?: {
                decidedBy?: string;
                quorum: number;
                reason?: string | null;
                /** @enum {string} */
                status: "pending" | "approved" | "rejected";
            };
            businessId: string;
            /** @description Single use; bound to this agent, business and request */
            confirmationToken: string;
            expiresAt: string;
            /** @description Set when a human must approve first: follow it on GET /v1/proposals/{id} */
            proposalId?: string;
            summary: string;
        };
        CommitAnswer: {
            outcome: components["schemas"]["Outcome"];
            /**
             * @description Present when the commit had already happened (the same agent, token, operation and params): the stored result, nothing run again; the header `Idempotent-Replayed: true` says the same
             * @constant
             */
            replayed?: true;
            result: unknown;
            /** @enum {string} */
            status: "pending" | "approved" | "executing" | "committed" | "rejected" | "expired" | "cancelled";
        };
        /** @description Every failure of the agent API */
        Error: {
            error: {
                /**
                 * @description Stable machine-readable code; the message is for humans
                 * @enum {string}
                 */
                code: "invalid_request" | "invalid_json" | "invalid_params" | "unauthorized" | "operation_not_allowed" | "not_an_approver" | "owner_cannot_approve" | "step_up_required" | "step_up_failed" | "invalid_token" | "consumed" | "expired" | "principal_mismatch" | "operation_mismatch" | "params_mismatch" | "rejected" | "not_approved" | "not_found" | "unknown_operation" | "not_pending" | "nothing_to_retry" | "operation_removed" | "conflict" | "idempotency_key_reused" | "payload_too_large" | "rate_limited" | "internal" | "execution_failed" | "unavailable" | "database_unavailable" | "insufficient_storage";
                /** @description Every schema error, on a 400 */
                details?: components["schemas"]["ErrorDetail"][];
                message: string;
                /** @description Also in the server log line of this request */
                requestId: string;
            };
        };
        ErrorDetail: {
            message: string;
            /** @description JSON pointer of the offending value ("" for the whole body) */
            path: string;
        };
        OperationInfo: {
            /** @enum {string} */
            commit: "on_approve" | "agent";
            /** @enum {string} */
            confirmationType: "payment" | "approval" | "verification";
            description: string;
            expiresInSeconds: number;
            name: string;
            /** @description JSON Schema of the params */
            params: {
                [key: string]: unknown;
            };
            quorum: number;
        };
        /** @description The one answer about a decision; silence is never consent (an undecided proposal ends expired) */
        Outcome: {
            decidedBy: string[];
            /** @enum {string} */
            outcome: "pending" | "approved" | "committed" | "denied" | "expired" | "cancelled" | "failed";
            proposalId: string;
            reason: string | null;
            /** @description Asking again is the right move: true only while pending and after a failed execution */
            retryable: boolean;
            /** @description A human (or a rule a human wrote) said yes to exactly this proposal */
            userConsent: boolean;
        };
        ProposalCreated: {
            approvals: [
            ];
            /** @description tk_conf_…, returned this once; needed to commit `commit: agent` operations */
            confirmToken: string;
            expiresAt: string;
            id: string;
            operation: string;
            outcome: components["schemas"]["Outcome"];
            quorum: number;
            /** @enum {string} */
            status: "pending" | "approved" | "executing" | "committed" | "rejected" | "expired" | "cancelled";
            summary: string;
        };
        /** @description The open (or not yet seen) request with the same identity, answered instead of a new one (200) */
        ProposalReused: {
            approvals: {
                approver: string;
                /** @description ISO 8601 time */
                at: string;
            }[];
            /** @description The request's tk_conf_… token when it was created with this same API key; null otherwise */
            confirmToken: string | null;
            decision: {
                at: string;
                by: string;
                reason: string | null;
            } | null;
            /** @description Why the last execution failed */
            error: string | null;
            /** @description ISO 8601 time; at this instant the token is expired */
            expiresAt: string;
            id: string;
            operation: string;
            outcome: components["schemas"]["Outcome"];
            params: {
                [key: string]: unknown;
            };
            quorum: number;
            /** @description The executor's result once committed, else null */
            result: unknown;
            /** @constant */
            reused: true;
            /** @enum {string} */
            status: "pending" | "approved" | "executing" | "committed" | "rejected" | "expired" | "cancelled";
            /** @description Written by twokey from the operation template, never by the agent */
            summary: string;
        };
        /** @description A proposal as its agent sees it; never the confirmation token */
        ProposalView: {
            approvals: {
                approver: string;
                /** @description ISO 8601 time */
                at: string;
            }[];
            decision: {
                at: string;
                by: string;
                reason: string | null;
            } | null;
            /** @description Why the last execution failed */
            error: string | null;
            /** @description ISO 8601 time; at this instant the token is expired */
            expiresAt: string;
            id: string;
            operation: string;
            outcome: components["schemas"]["Outcome"];
            params: {
                [key: string]: unknown;
            };
            quorum: number;
            /** @description The executor's result once committed, else null */
            result: unknown;
            /** @enum {string} */
            status: "pending" | "approved" | "executing" | "committed" | "rejected" | "expired" | "cancelled";
            /** @description Written by twokey from the operation template, never by the agent */
            summary: string;
        };
        ResumeState: {
            state: string;
        };
    };
    responses: never;
    parameters: never;
    requestBodies: never;
    headers: never;
    pathItems: never;
};
export type $defs = Record<string, never>;
export type operations = Record<string, never>;
