-- Argo CD health for Seshat's DatabaseSchema, DatabaseMigration and DatabaseFleet
-- (group seshat.dev).
--
-- It reads what `seshat run --publish-status` writes on the resource: status.conditions
-- (Ready, Reconciling, Stalled; status "True"/"False"; reason; message) and
-- status.observedGeneration, set only once the controller has judged this very spec.
-- Reasons are Seshat's stable words (gitops/resources/status.py), e.g. InSync,
-- AwaitingApproval, DestructiveChangesDisallowed, ChecksumModified, ApplyFailed.
--
-- deploy/argocd/argocd-cm-patch.yaml embeds this script verbatim (a test checks it).
local hs = {}

local function condition(status, wanted)
  if status.conditions == nil then
    return nil
  end
  for _, c in ipairs(status.conditions) do
    if c.type == wanted then
      return c
    end
  end
  return nil
end

local function explain(c)
  local reason = c.reason or "Unknown"
  if c.message ~= nil and c.message ~= "" then
    return reason .. ": " .. c.message
  end
  return reason
end

-- Suspended first: a suspended resource is not worked on, whatever its status says.
if obj.spec ~= nil and obj.spec.suspend == true then
  hs.status = "Suspended"
  hs.message = "Suspended: spec.suspend is set"
  return hs
end

local status = obj.status
if status == nil or status.conditions == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the controller: no status yet"
  return hs
end

local generation = obj.metadata.generation
if generation ~= nil then
  local observed = status.observedGeneration
  if observed == nil or observed < generation then
    hs.status = "Progressing"
    hs.message = "Waiting for the controller to observe generation " .. tostring(generation)
    return hs
  end
end

-- Blocked: nothing changes until an input does (a new artifact, a policy, an approval).
local stalled = condition(status, "Stalled")
if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = "Blocked: " .. explain(stalled)
  return hs
end

-- Failed: a fault Seshat retries every spec.retryInterval; Degraded until a retry succeeds.
local reconciling = condition(status, "Reconciling")
if status.phase == "Failed" then
  hs.status = "Degraded"
  if reconciling ~= nil then
    hs.message = "Failed (retrying): " .. explain(reconciling)
  else
    hs.message = "Failed (retrying)"
  end
  return hs
end

local ready = condition(status, "Ready")
if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = explain(ready)
  return hs
end

-- Work under way, or waiting for a person (AwaitingApproval names the plan to approve).
if reconciling ~= nil and reconciling.status == "True" then
  hs.status = "Progressing"
  hs.message = explain(reconciling)
  return hs
end

hs.status = "Progressing"
if ready ~= nil then
  hs.message = "Not ready: " .. explain(ready)
else
  hs.message = "Waiting for the controller: no Ready condition yet"
end
return hs
