/** The operations the MCP tests gate: one commits through the agent, one on approval. */
export const mcpConfigYaml = `
operations:
  - name: upgrade_plan
    description: Change an organisation's billing plan
    params:
      type: object
      required: [org, plan]
      properties:
        org: { type: string }
        plan: { type: string, enum: [pro, scale, enterprise] }
    summary: "{{agent}} wants to move {{params.org}} to {{params.plan}}."
    expiresIn: 10m
    approval:
      approvers: [web:alice, web:bob]
      quorum: 1
      slack: { channel: C0APPROVALS }
    commit: agent
    executor: { type: echo }
  - name: delete_workspace
    description: Delete a workspace
    params:
      type: object
      required: [workspace]
      properties:
        workspace: { type: string }
    summary: "{{agent}} wants to delete workspace {{params.workspace}}."
    approval:
      approvers: [web:alice, web:bob]
      quorum: 1
    commit: on_approve
    executor: { type: echo }
`;
