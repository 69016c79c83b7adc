// The page scripts (reports, the explainer, the graph viewer, the dashboards, the workbench pages) are plain
// browser scripts: one IIFE each, "use strict", no modules and no build step, inlined by the page shell
// (interp/report/shell.py) into pages that open from the file system (or are served whole by interp serve), where a
// page's Content-Security-Policy lets no script be imported.
//
// One dialect: ES2020 (const and let, arrow functions, for-of, destructuring, spread, optional chaining), which
// every current browser runs; the rules below refuse the ES5 forms it replaces (var, function expressions as
// callbacks, apply for spreading).
//
// One set of helpers, in interp/report/assets: dom.js (window.interpDom: assign, el, clear, byId, served,
// readJson), svg.js (interpDom.svg, for the pages that draw SVG) and feature_id.js (window.interpFeatureId.index,
// the Cantor pairing). Every other script is refused a second definition of those names, the DOM calls they wrap,
// and the pairing's formula.
import js from "@eslint/js";

const PAGE_SCRIPTS = [
  "interp/report/assets/**/*.js",
  "interp/circuits/features/viewer/**/*.js",
  "interp/sae/dashboards/assets/**/*.js",
  "interp/serve/pages/assets/**/*.js",
];
const SHARED = ["interp/report/assets/dom.js", "interp/report/assets/svg.js", "interp/report/assets/feature_id.js"];
const HELPERS = "/^(assign|el|svg|clear|byId|served|readJson|cantor|featureIndex|\\$)$/";
const HELPER =
  "A page helper (assign, el, svg, clear, byId, served, readJson; featureIndex) is defined once, in " +
  "interp/report/assets (dom.js, svg.js, feature_id.js): take it from window.interpDom or window.interpFeatureId";
const DOM = "from window.interpDom (interp/report/assets/dom.js)";

export default [
  js.configs.recommended,
  {
    files: PAGE_SCRIPTS,
    languageOptions: {
      ecmaVersion: 2020,
      sourceType: "script",
      globals: {
        window: "readonly",
        document: "readonly",
        Option: "readonly",
        location: "readonly",
        history: "readonly",
        localStorage: "readonly",
        fetch: "readonly",
      },
    },
    rules: {
      eqeqeq: "error",
      strict: ["error", "function"],
      "no-unused-vars": ["error", { caughtErrors: "none" }],
      "no-var": "error",
      "prefer-const": "error",
      "prefer-arrow-callback": "error",
      "arrow-body-style": ["error", "as-needed"],
      "prefer-spread": "error",
      "prefer-rest-params": "error",
      "object-shorthand": ["error", "always"],
    },
  },
  {
    files: PAGE_SCRIPTS,
    ignores: SHARED,
    rules: {
      "no-restricted-syntax": [
        "error",
        { selector: `FunctionDeclaration[id.name=${HELPERS}]`, message: `${HELPER}.` },
        { selector: `VariableDeclarator[id.name=${HELPERS}]`, message: `${HELPER} (const { el } = window.interpDom).` },
        {
          // n (n + 1) / 2 or (n + 1) n / 2: the triangular number of the Cantor pairing
          selector:
            "BinaryExpression[operator='/'][right.value=2] > BinaryExpression.left[operator='*']" +
            ":matches([right.operator='+'][right.right.value=1], [left.operator='+'][left.right.value=1])",
          message:
            "A feature's featureIndex is computed once, in interp/report/assets/feature_id.js: " +
            "call window.interpFeatureId.index(layer, feature).",
        },
        {
          selector: "CallExpression[callee.property.name='replaceChildren'][arguments.length=0]",
          message: `Empty an element with clear() ${DOM}.`,
        },
      ],
      "no-restricted-properties": [
        "error",
        { object: "document", property: "createElement", message: `Build elements with el() ${DOM}.` },
        {
          object: "document",
          property: "createElementNS",
          message: "Build SVG elements with svg() from window.interpDom (interp/report/assets/svg.js).",
        },
        { object: "document", property: "getElementById", message: `Find elements with byId() ${DOM}.` },
      ],
    },
  },
];
