-- wrk script of bench/ratelimit.sh: from the client addresses MODE says, sent as X-Forwarded-For
-- by a trusted proxy (the loopback peer), ROUTE's request:
--   token  POST /auth/token with an empty body (TokenGate answers 400 invalid_request before any
--          database work)
--   login  GET /auth/login for the bench app (TokenGate stores a pending login and answers 302)
-- Arguments after `--`: MODE ROUTE. MODE is `one` (every request from one address), `distinct`
-- (every request from an address never seen: each needs a take) or a number N (N addresses in
-- turn); ROUTE is `token` (the default) or `login`.
local counter = 0
function setup(thread)
    counter = counter + 1
    thread:set("id", counter)
end

function init(args)
    mode = args[1] or "one"
    route = args[2] or "token"
    sent = 0
end

function request()
    sent = sent + 1
    local address
    if mode == "one" then
        address = "2001:db8::1"
    elseif mode == "distinct" then
        address = string.format("2001:db8:%x::%x:%x", id, math.floor(sent / 65536), sent % 65536)
    else
        address = string.format("2001:db8::%x", sent % tonumber(mode))
    end
    if route == "login" then
        return wrk.format("GET", "/auth/login?client_id=bench-app&redirect_uri=com.example.app%3A%2Fcb"
            .. "&response_type=code&state=bench&code_challenge_method=S256"
            .. "&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM", { ["X-Forwarded-For"] = address })
    end
    return wrk.format("POST", "/auth/token", {
        ["Content-Type"] = "application/x-www-form-urlencoded",
        ["X-Forwarded-For"] = address,
    }, "")
end
