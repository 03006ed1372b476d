/**
 * postgres.js, the one module of src/ that imports the driver's code (a rule in
 * .dependency-cruiser.cjs keeps it so; types may be imported from 'postgres' anywhere).
 *
 * twokey runs a patched postgres.js (patches/README.md: without it a database restart could end
 * the process). `npm install` patches the copy in this project's node_modules, but a project that
 * installs twokey gets the registry's copy, unpatched. So the build replaces this module in dist/
 * with postgres.js itself, patched, bundled in (scripts/build.js): every way the package is run —
 * the `twokey` command, `import { startTwokey } from 'twokey'` — runs the fixed driver, whatever
 * the installing project's node_modules hold.
 */
export { default } from 'postgres';
