/**
 * Every pointer into the documentation resolves: a `docs/<page>.md#anchor` link (README, docs, code comments) names a
 * heading that page has, and a `docs/<page>.md, "Section"` reference names (part of) one of its headings' text — or,
 * written `docs/<page>.md at <commit>, "Section"`, one of the headings the page had at that commit (the history that
 * left a page stays in git: docs/benchmarks.md's pass-by-pass diary at 09f4c1e). The pages get rewritten: a pointer
 * to a section that is gone sends a reader looking for something the page no longer says.
 */
import { describe, expect, it } from "@effect/vitest"
import { execFileSync } from "node:child_process"
import { readdirSync, readFileSync, statSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("../../", import.meta.url))

const walk = (dir: string): Array<string> =>
  readdirSync(join(root, dir)).flatMap((name) => {
    const path = join(dir, name)
    if (statSync(join(root, path)).isDirectory()) return walk(path)
    return /\.(ts|mjs|js|sh|md)$/.test(name) ? [path] : []
  })

/** The files whose text may point into docs/: sources, scripts, tests, the docs and the README. */
const files = [...["src", "scripts", "test", "docs", "bin", "examples"].flatMap(walk), "README.md"]

/** A heading's GitHub anchor: lower case, punctuation but `-` dropped, spaces to `-`. */
const slug = (heading: string) => heading.trim().toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, "").replace(/\s/g, "-")

const texts = new Map<string, string>()

/** The page's text now, or at `commit` (git). */
const pageText = (page: string, commit?: string): string => {
  const key = `${commit ?? ""}:${page}`
  if (!texts.has(key)) {
    texts.set(
      key,
      commit === undefined
        ? readFileSync(join(root, page), "utf8")
        : execFileSync("git", ["show", `${commit}:${page}`], { cwd: root, encoding: "utf8", stdio: "pipe" })
    )
  }
  return texts.get(key)!
}

const headingsOf = (page: string, commit?: string): ReadonlyArray<string> =>
  pageText(page, commit).split("\n").flatMap((line) => {
    const match = /^#{1,6}\s+(.*)$/.exec(line)
    return match === null ? [] : [match[1]!.trim()]
  })

/** The text of a file with comment markers at line starts removed, so a reference broken over lines reads whole. */
const flatten = (text: string) => text.replace(/\n[ \t]*(?:\*|\/\/|#)?[ \t]*/g, " ")

interface Reference {
  readonly file: string
  readonly page: string
  readonly commit?: string
  readonly anchor?: string
  readonly section?: string
}

const references = (): Array<Reference> =>
  files.flatMap((file) => {
    const text = flatten(readFileSync(join(root, file), "utf8"))
    const found: Array<Reference> = []
    const here = file.startsWith("docs/") ? "docs/" : ""
    for (const match of text.matchAll(/(?:\]\()?((?:docs\/)?[\w.-]+\.md)#([\w-]+)/g)) {
      const page = match[1]!.startsWith("docs/") ? match[1]! : `${here}${match[1]!}`
      if (match[0].startsWith("](") || match[1]!.startsWith("docs/")) found.push({ file, page, anchor: match[2]! })
    }
    const section = /(docs\/[\w.-]+\.md)(?: at ([0-9a-f]{7,40}))?,? (?:section )?(?:"([^"]+)"|«([^»]+)»)/g
    for (const match of text.matchAll(section)) {
      found.push({
        file,
        page: match[1]!,
        ...(match[2] === undefined ? {} : { commit: match[2] }),
        section: (match[3] ?? match[4])!
      })
    }
    return found
  })

const plain = (text: string) => text.toLowerCase().replace(/`/g, "")

/** What each reference that does not resolve says, as `file: page[ at commit], "section"` or `file: page#anchor`. */
const broken = (): Array<string> =>
  references().flatMap((reference) => {
    const at = reference.commit === undefined ? "" : ` at ${reference.commit}`
    let headings: ReadonlyArray<string>
    try {
      headings = headingsOf(reference.page, reference.commit)
    } catch {
      return [`${reference.file}: ${reference.page}${at} does not exist`]
    }
    if (reference.anchor !== undefined) {
      return headings.some((heading) => slug(heading) === reference.anchor)
        ? []
        : [`${reference.file}: ${reference.page}#${reference.anchor}`]
    }
    const wanted = plain(reference.section!)
    return headings.some((heading) => plain(heading).includes(wanted))
      ? []
      : [`${reference.file}: ${reference.page}${at}, "${reference.section}"`]
  })

describe("references into the docs", () => {
  it("name a heading the page has, or had at the commit they name (an anchor, or part of a heading's text)", () => {
    expect(broken()).toEqual([])
  })

  it("are found at all (the patterns still match how the code and docs write them)", () => {
    const all = references()
    expect(all.filter((r) => r.anchor !== undefined).length).toBeGreaterThan(3)
    expect(all.filter((r) => r.section !== undefined).length).toBeGreaterThan(3)
    expect(all.filter((r) => r.commit !== undefined).length).toBeGreaterThan(3)
  })
})
